//! The dynamic value stored in channels, writes and metadata.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};

use super::Str;

/// A msgpack value as LangGraph stores it.
///
/// Maps keep their entries in order and accept any key type, as Python's
/// serializer does. Decoding Python's bytes into a `Value` and encoding it again
/// gives back the same bytes (see [`crate::serde::msgpack`]).
///
/// Integers: non-negative values up to `i64::MAX` and all negative values are
/// [`Value::Int`]; only values above `i64::MAX` use [`Value::UInt`]. The `From`
/// conversions keep to this rule.
///
/// # Nesting
///
/// Every entry point of the crate that walks a value bounds its walk at
/// [`msgpack::MAX_DEPTH`](crate::serde::msgpack::MAX_DEPTH) levels of arrays,
/// maps and extension values and refuses deeper values with
/// [`Error::Serde`], and no decoder produces a deeper value. `Clone` never
/// recurses (lists and maps are shared, chains of extensions are copied in a
/// loop). `Debug`, `PartialEq` and dropping the last holder of a value do
/// recurse, once per level, as for `serde_json::Value`: a value a caller built
/// hundreds of thousands of levels deep needs a thread with a large stack to
/// be compared, printed or dropped.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    /// Python `None` (msgpack nil).
    #[default]
    Nil,
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An integer above `i64::MAX`.
    UInt(u64),
    /// A 32-bit float (Python never writes one; kept for other writers).
    F32(f32),
    /// A 64-bit float.
    Float(f64),
    /// A UTF-8 string (short ones held inline, see [`Str`]).
    Str(Str),
    /// Raw bytes (msgpack bin).
    Bin(Bytes),
    /// A list (Python lists and tuples). Shared: cloning a `Value` is a
    /// reference-count increment for lists and maps, so savers can hold and
    /// hand out values without copying them; change one with
    /// `&mut` access ([`SharedVec`] copies only when the list is shared).
    Array(SharedVec<Value>),
    /// A map with keys of any type, in order. Shared like [`Value::Array`].
    Map(SharedVec<(Value, Value)>),
    /// A msgpack extension: one of LangGraph's encoded Python objects, or an
    /// unknown code kept verbatim. Boxed: extensions are rare, and keeping
    /// them out of line keeps every `Value` at 40 bytes instead of 48.
    Ext(Box<Ext>),
}

/// LangGraph's msgpack extension codes (spec §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExtKind {
    /// Code 0: `module.name(arg)`.
    ConstructorSingleArg,
    /// Code 1: `module.name(*args)`.
    ConstructorPosArgs,
    /// Code 2: `module.name(**kwargs)`.
    ConstructorKwArgs,
    /// Code 3: `module.name.method(arg)` (only `datetime.fromisoformat`).
    MethodSingleArg,
    /// Code 4: a pydantic v1 model.
    PydanticV1,
    /// Code 5: a pydantic v2 model (LangChain messages among them).
    PydanticV2,
    /// Code 6: a numpy array.
    NumpyArray,
    /// Code 7: a delta-channel snapshot.
    DeltaSnapshot,
    /// Any other code.
    Unknown(i8),
}

impl ExtKind {
    /// The msgpack extension type code.
    pub fn code(self) -> i8 {
        match self {
            ExtKind::ConstructorSingleArg => 0,
            ExtKind::ConstructorPosArgs => 1,
            ExtKind::ConstructorKwArgs => 2,
            ExtKind::MethodSingleArg => 3,
            ExtKind::PydanticV1 => 4,
            ExtKind::PydanticV2 => 5,
            ExtKind::NumpyArray => 6,
            ExtKind::DeltaSnapshot => 7,
            ExtKind::Unknown(c) => c,
        }
    }

    /// The kind for a type code.
    pub fn from_code(code: i8) -> Self {
        match code {
            0 => ExtKind::ConstructorSingleArg,
            1 => ExtKind::ConstructorPosArgs,
            2 => ExtKind::ConstructorKwArgs,
            3 => ExtKind::MethodSingleArg,
            4 => ExtKind::PydanticV1,
            5 => ExtKind::PydanticV2,
            6 => ExtKind::NumpyArray,
            7 => ExtKind::DeltaSnapshot,
            c => ExtKind::Unknown(c),
        }
    }
}

/// A msgpack extension value.
///
/// For LangGraph's codes 0–7 the payload (itself msgpack) is decoded into a
/// [`Value`] so its parts can be read; it is data only, nothing is ever
/// constructed or executed. Unknown codes, and payloads of known codes that are
/// not a single well-formed msgpack value, are kept as raw bytes.
#[derive(Debug, PartialEq)]
pub struct Ext {
    pub(crate) code: i8,
    pub(crate) payload: ExtPayload,
}

/// A copy made in a loop along extensions whose payload is directly another
/// extension (a snapshot of a snapshot…), so that cloning never recurses:
/// lists and maps below are shared, not copied.
impl Clone for Ext {
    fn clone(&self) -> Self {
        let mut codes = Vec::new();
        let mut cur = self;
        let innermost = loop {
            match &cur.payload {
                ExtPayload::Decoded(inner) => match &**inner {
                    Value::Ext(next) => {
                        codes.push(cur.code);
                        cur = next;
                    }
                    // Not an extension: a shallow copy.
                    other => break ExtPayload::Decoded(Box::new(other.clone())),
                },
                ExtPayload::Raw(raw) => break ExtPayload::Raw(raw.clone()),
            }
        };
        let mut ext = Ext {
            code: cur.code,
            payload: innermost,
        };
        while let Some(code) = codes.pop() {
            ext = Ext {
                code,
                payload: ExtPayload::Decoded(Box::new(Value::Ext(Box::new(ext)))),
            };
        }
        ext
    }
}

/// The payload of an [`Ext`].
#[derive(Debug, Clone, PartialEq)]
pub enum ExtPayload {
    /// The payload decoded as one msgpack value.
    Decoded(Box<Value>),
    /// The payload bytes, kept verbatim.
    Raw(Bytes),
}

/// The memory layout of a numpy array's buffer (ext code 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumpyOrder {
    /// Row-major (`"C"`).
    C,
    /// Column-major (`"F"`).
    F,
}

impl NumpyOrder {
    /// The letter stored in the payload: `"C"` or `"F"`.
    pub fn as_str(self) -> &'static str {
        match self {
            NumpyOrder::C => "C",
            NumpyOrder::F => "F",
        }
    }

    /// Parses the stored letter.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "C" => Some(NumpyOrder::C),
            "F" => Some(NumpyOrder::F),
            _ => None,
        }
    }
}

/// A read-only view of a numpy array stored as ext code 6:
/// `[dtype, shape, order, buffer]`.
///
/// The buffer is not interpreted; `dtype` is numpy's `dtype.str` (for example
/// `"<i4"`, `"<f8"`), which says how to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumpyView<'a> {
    /// numpy's `dtype.str`, e.g. `"<i4"`.
    pub dtype: &'a str,
    /// The dimensions.
    pub shape: Vec<u64>,
    /// The order of the elements in `data`.
    pub order: NumpyOrder,
    /// The raw element bytes.
    pub data: &'a Bytes,
}

/// Reading and building LangGraph's extension values.
///
/// Everything here is data: an [`Ext`] records which Python class (module and
/// name) and which arguments Python used, so that Python can rebuild the
/// object when it reads the bytes back. This crate never imports, constructs or
/// executes anything named in an extension value.
///
/// ```
/// use checkpointer::serde::{Ext, ExtKind, Value};
/// let uuid = Ext::object(
///     ExtKind::ConstructorSingleArg,
///     "uuid",
///     "UUID",
///     Value::from("12345678123456781234567812345678"),
/// )
/// .unwrap();
/// assert_eq!(uuid.module(), Some("uuid"));
/// assert_eq!(uuid.name(), Some("UUID"));
/// assert_eq!(uuid.arg().and_then(Value::as_str), Some("12345678123456781234567812345678"));
/// ```
impl Ext {
    /// The msgpack extension type code.
    pub fn code(&self) -> i8 {
        self.code
    }

    /// The kind of value the code stands for.
    pub fn kind(&self) -> ExtKind {
        ExtKind::from_code(self.code)
    }

    /// The payload, decoded or verbatim.
    pub fn payload(&self) -> &ExtPayload {
        &self.payload
    }

    /// The decoded payload, if it is one (codes 0–7 with a well-formed payload).
    pub fn decoded(&self) -> Option<&Value> {
        match &self.payload {
            ExtPayload::Decoded(v) => Some(v),
            ExtPayload::Raw(_) => None,
        }
    }

    /// The elements of an object payload (codes 0–5): `[module, name, arg(, method)]`.
    fn object_parts(&self) -> Option<&[Value]> {
        if !(0..=5).contains(&self.code) {
            return None;
        }
        self.decoded()?.as_array()
    }

    /// The Python module of the recorded class (codes 0–5), e.g. `"datetime"`.
    pub fn module(&self) -> Option<&str> {
        self.object_parts()?.first()?.as_str()
    }

    /// The Python class (or, for `re.compile`, function) name (codes 0–5).
    pub fn name(&self) -> Option<&str> {
        self.object_parts()?.get(1)?.as_str()
    }

    /// The constructor argument (codes 0–5): the single argument (code 0 and
    /// 3), the positional argument list (1), the keyword/field map (2, 4, 5).
    pub fn arg(&self) -> Option<&Value> {
        self.object_parts()?.get(2)
    }

    /// The fourth element when it is a string (codes 0–5): `"fromisoformat"`
    /// for datetimes (code 3), `"model_validate_json"` for pydantic v2 models.
    pub fn method(&self) -> Option<&str> {
        self.object_parts()?.get(3)?.as_str()
    }

    /// The wrapped value of a delta-channel snapshot (code 7).
    pub fn snapshot_value(&self) -> Option<&Value> {
        if self.code == 7 {
            self.decoded()
        } else {
            None
        }
    }

    /// The parts of a numpy array (code 6), when the payload has the expected
    /// shape `[dtype: str, shape: [int…], "C"|"F", buffer: bin]`.
    pub fn numpy_view(&self) -> Option<NumpyView<'_>> {
        if self.code != 6 {
            return None;
        }
        match self.decoded()?.as_array()? {
            [Value::Str(dtype), Value::Array(shape), Value::Str(order), Value::Bin(data)] => Some(NumpyView {
                dtype,
                shape: shape
                    .iter()
                    .map(|d| d.as_i64().and_then(|d| u64::try_from(d).ok()))
                    .collect::<Option<Vec<u64>>>()?,
                order: NumpyOrder::parse(order)?,
                data,
            }),
            _ => None,
        }
    }

    /// An object extension (codes 0–5): payload `[module, name, arg]`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `kind` is not one of codes 0–5.
    pub fn object(kind: ExtKind, module: impl Into<String>, name: impl Into<String>, arg: Value) -> Result<Ext> {
        Self::object_parts_ext(kind, vec![string_value(module), string_value(name), arg])
    }

    /// An object extension with a fourth `method` element: code 3
    /// (`["datetime", "datetime", iso, "fromisoformat"]`) and code 5
    /// (`[module, name, fields, "model_validate_json"]`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `kind` is not one of codes 0–5.
    pub fn object_with_method(
        kind: ExtKind,
        module: impl Into<String>,
        name: impl Into<String>,
        arg: Value,
        method: impl Into<String>,
    ) -> Result<Ext> {
        Self::object_parts_ext(
            kind,
            vec![string_value(module), string_value(name), arg, string_value(method)],
        )
    }

    fn object_parts_ext(kind: ExtKind, parts: Vec<Value>) -> Result<Ext> {
        let code = kind.code();
        if !(0..=5).contains(&code) {
            return Err(Error::invalid(format!(
                "extension code {code} does not hold a [module, name, arg] object"
            )));
        }
        Ok(Ext {
            code,
            payload: ExtPayload::Decoded(Box::new(Value::Array(parts.into()))),
        })
    }

    /// A delta-channel snapshot (code 7) wrapping `value`.
    pub fn delta_snapshot(value: Value) -> Ext {
        Ext {
            code: 7,
            payload: ExtPayload::Decoded(Box::new(value)),
        }
    }

    /// A numpy array (code 6): `[dtype, shape, order, data]`, as Python writes
    /// it. `data` must hold the elements in `order`; it is not checked against
    /// `dtype` and `shape`.
    pub fn numpy(
        dtype: impl Into<String>,
        shape: impl IntoIterator<Item = u64>,
        order: NumpyOrder,
        data: Bytes,
    ) -> Ext {
        let shape = shape.into_iter().map(Value::from).collect();
        Ext {
            code: 6,
            payload: ExtPayload::Decoded(Box::new(Value::Array(
                (vec![
                    string_value(dtype),
                    Value::Array(shape),
                    Value::Str(order.as_str().into()),
                    Value::Bin(data),
                ])
                .into(),
            ))),
        }
    }

    /// The extension the decoder produces for type `code` with payload bytes
    /// `data`: for codes 0–7 a payload that is exactly one msgpack value in
    /// Python's canonical form is decoded; anything else is kept verbatim, so
    /// encoding the result always writes `data` back unchanged.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use checkpointer::serde::{Ext, ExtPayload};
    /// let snap = Ext::raw(7, Bytes::from_static(&[0x92, 0x01, 0x02]));
    /// assert!(matches!(snap.payload(), ExtPayload::Decoded(_)));
    /// // 1 written as `cc 01` is not Python's form: kept as bytes
    /// let odd = Ext::raw(7, Bytes::from_static(&[0xcc, 0x01]));
    /// assert!(matches!(odd.payload(), ExtPayload::Raw(_)));
    /// ```
    pub fn raw(code: i8, data: Bytes) -> Ext {
        if (0..=7).contains(&code) {
            if let Ok(value) = super::msgpack_codec::decode(&data) {
                if super::msgpack_codec::encode(&value).is_ok_and(|b| b[..] == data[..]) {
                    return Ext {
                        code,
                        payload: ExtPayload::Decoded(Box::new(value)),
                    };
                }
            }
        }
        Ext {
            code,
            payload: ExtPayload::Raw(data),
        }
    }

    /// An extension of type `code` whose payload is the encoding of `value`.
    /// Codes 0–7 keep `value` decoded; other codes store its bytes, as the
    /// decoder does for codes it does not know.
    ///
    /// # Errors
    /// [`Error::Serde`] when `code` is not 0–7 and `value` cannot be encoded.
    pub fn from_decoded(code: i8, value: Value) -> Result<Ext> {
        let payload = if (0..=7).contains(&code) {
            ExtPayload::Decoded(Box::new(value))
        } else {
            ExtPayload::Raw(Bytes::from(super::msgpack_codec::encode(&value)?))
        };
        Ok(Ext { code, payload })
    }
}

impl Value {
    /// A delta-channel snapshot (ext code 7) wrapping `value`.
    pub fn delta_snapshot(value: Value) -> Value {
        Value::Ext(Box::new(Ext::delta_snapshot(value)))
    }

    /// The value inside a delta-channel snapshot, or `self` for anything else
    /// (including a snapshot whose payload could not be decoded).
    ///
    /// ```
    /// use checkpointer::Value;
    /// let snap = Value::delta_snapshot(Value::from(vec![1, 2]));
    /// assert_eq!(snap.unwrap_delta_snapshot(), &Value::from(vec![1, 2]));
    /// assert_eq!(Value::from(3).unwrap_delta_snapshot(), &Value::from(3));
    /// ```
    pub fn unwrap_delta_snapshot(&self) -> &Value {
        match self {
            Value::Ext(e) => e.snapshot_value().unwrap_or(self),
            _ => self,
        }
    }

    /// The string, if this is a [`Value::Str`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is an integer that fits `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::UInt(u) => i64::try_from(*u).ok(),
            _ => None,
        }
    }

    /// The boolean, if this is a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Any number as `f64` (booleans are not numbers).
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::UInt(u) => Some(*u as f64),
            Value::F32(f) => Some(f64::from(*f)),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The entries, if this is a map.
    pub fn as_map(&self) -> Option<&[(Value, Value)]> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The extension, if this is one.
    pub fn as_ext(&self) -> Option<&Ext> {
        match self {
            Value::Ext(e) => Some(e),
            _ => None,
        }
    }

    /// Whether this is [`Value::Nil`].
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    /// The value under string key `key`, if this is a map holding it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// A map from string keys, in order.
    pub fn map<K: Into<String>>(entries: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Map(entries.into_iter().map(|(k, v)| (string_value(k), v)).collect())
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

macro_rules! from_signed {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(i: $t) -> Self {
                Value::Int(i64::from(i))
            }
        }
    )*};
}
from_signed!(i8, i16, i32, i64, u8, u16, u32);

impl From<u64> for Value {
    fn from(u: u64) -> Self {
        match i64::try_from(u) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::UInt(u),
        }
    }
}

impl From<usize> for Value {
    fn from(u: usize) -> Self {
        Value::from(u as u64)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.into())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s.into())
    }
}

impl From<Str> for Value {
    fn from(s: Str) -> Self {
        Value::Str(s)
    }
}

impl From<Bytes> for Value {
    fn from(b: Bytes) -> Self {
        Value::Bin(b)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Self {
        Value::Array(v.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Nil, Into::into)
    }
}

impl From<Ext> for Value {
    fn from(e: Ext) -> Self {
        Value::Ext(Box::new(e))
    }
}

/// A [`Value::Str`] from anything that converts into a `String`.
fn string_value(s: impl Into<String>) -> Value {
    Value::Str(Str::from(s.into()))
}

/// A shared, copy-on-write vector: the storage of [`Value::Array`] and
/// [`Value::Map`].
///
/// Cloning is a reference-count increment, so a value held by a saver, a
/// checkpoint and a caller is one allocation. Reading goes through `Deref` to
/// `Vec<T>`; mutable access (`DerefMut`, `iter_mut`, `push`…) first copies the
/// vector if anyone else holds it ([`Arc::make_mut`]), so no holder ever sees
/// another's change.
///
/// ```
/// use checkpointer::Value;
/// let a = Value::from(vec![1_i64, 2]);
/// let mut b = a.clone();
/// if let Value::Array(items) = &mut b {
///     items.push(Value::from(3_i64)); // copies: `a` still holds [1, 2]
/// }
/// assert_eq!(a.as_array().unwrap().len(), 2);
/// assert_eq!(b.as_array().unwrap().len(), 3);
/// ```
pub struct SharedVec<T>(Arc<Shared<T>>);

/// The shared part of a [`SharedVec`]: the elements and a memo of facts
/// derived from them (0 = not known), which any mutable access clears.
struct Shared<T> {
    items: Vec<T>,
    memo: AtomicU64,
}

impl<T: Clone> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared {
            items: self.items.clone(),
            memo: AtomicU64::new(self.memo.load(Ordering::Relaxed)),
        }
    }
}

impl<T> SharedVec<T> {
    /// An empty vector.
    pub fn new() -> Self {
        Vec::new().into()
    }

    /// Whether both share one allocation (cloned from each other).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The memo (0 = unknown). Only `Value`'s size walk writes it.
    pub(crate) fn memo(&self) -> u64 {
        self.0.memo.load(Ordering::Relaxed)
    }

    pub(crate) fn set_memo(&self, memo: u64) {
        self.0.memo.store(memo, Ordering::Relaxed);
    }
}

impl<T: Clone> SharedVec<T> {
    /// The elements as an owned vector, copied only if shared.
    pub fn into_vec(self) -> Vec<T> {
        match Arc::try_unwrap(self.0) {
            Ok(shared) => shared.items,
            Err(arc) => arc.items.clone(),
        }
    }
}

impl<T> Clone for SharedVec<T> {
    fn clone(&self) -> Self {
        SharedVec(Arc::clone(&self.0))
    }
}

impl<T> Default for SharedVec<T> {
    fn default() -> Self {
        SharedVec::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for SharedVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.items.iter()).finish()
    }
}

/// Element by element, as `Vec`'s: a shared list holding a NaN is not equal
/// to itself (no pointer shortcut).
impl<T: PartialEq> PartialEq for SharedVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0.items == other.0.items
    }
}

impl<T> Deref for SharedVec<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0.items
    }
}

impl<T: Clone> DerefMut for SharedVec<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        let shared = Arc::make_mut(&mut self.0);
        *shared.memo.get_mut() = 0;
        &mut shared.items
    }
}

impl<T> From<Vec<T>> for SharedVec<T> {
    fn from(items: Vec<T>) -> Self {
        SharedVec(Arc::new(Shared {
            items,
            memo: AtomicU64::new(0),
        }))
    }
}

impl<T> FromIterator<T> for SharedVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<T>>().into()
    }
}

impl<T: Clone> IntoIterator for SharedVec<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a, T> IntoIterator for &'a SharedVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.items.iter()
    }
}

impl<'a, T: Clone> IntoIterator for &'a mut SharedVec<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.deref_mut().iter_mut()
    }
}
