//! The typed bridge: any `Serialize` type to a [`Value`] and any
//! `Deserialize` type from one, without going through bytes.
//!
//! The mapping follows what Python's serializer would write for the
//! equivalent Python data: structs and maps become maps (struct fields in
//! declaration order, as a Python dict), sequences and tuples become arrays,
//! `()` and `None` become nil, byte buffers become bin, enums are externally
//! tagged as in `serde_json`.
//!
//! The bridge is a human-readable format (as `serde_json` is): types that
//! serialize differently for such formats, like `uuid::Uuid` or chrono's
//! types, become strings. For the Python objects themselves (a real
//! `uuid.UUID`, `datetime`…) use the types of [`py`](super::py).
//!
//! [`Value`] itself implements `Serialize` and `Deserialize`, so a `Value` can
//! sit inside a user's struct; extension values (Python objects) and 32-bit
//! floats inside it survive [`to_value`] / [`from_value`] unchanged. Other
//! serde formats see an extension as a `(code, payload_bytes)` pair.

use std::cell::{Cell, RefCell};
use std::fmt;

use ::serde::de::{
    self, value::SeqDeserializer, DeserializeOwned, DeserializeSeed, EnumAccess, Expected, IntoDeserializer, MapAccess,
    SeqAccess, Unexpected, VariantAccess, Visitor,
};
use ::serde::ser::{self, Serialize};
use ::serde::{forward_to_deserialize_any, Deserialize, Deserializer};
use bytes::Bytes;

use super::msgpack_codec::{encode, MAX_DEPTH};
use super::value::{Ext, ExtPayload, Value};
use crate::error::{Error, Result};

/// Newtype-struct name under which [`Value::Ext`] serializes itself; the
/// bridge's serializer recognises it and keeps the extension whole.
const EXT_TOKEN: &str = "$checkpointer::Ext";
/// Newtype-struct name under which [`Value::F32`] serializes itself, so the
/// bridge keeps it a 32-bit float (plain `f32` fields become Python floats).
const F32_TOKEN: &str = "$checkpointer::F32";

/// Converts any serializable value into a [`Value`].
///
/// ```
/// use checkpointer::serde::{msgpack, to_value};
///
/// #[derive(serde::Serialize)]
/// struct S { a: i32, b: (bool, Option<u8>) }
///
/// let v = to_value(&S { a: 1, b: (true, None) }).unwrap();
/// assert_eq!(hex(&msgpack::encode(&v).unwrap()), "82a16101a16292c3c0");
/// # fn hex(b: &[u8]) -> String { b.iter().map(|x| format!("{x:02x}")).collect() }
/// ```
///
/// # Errors
/// [`Error::Serde`] when the value's `Serialize` implementation fails, or for
/// an `i128`/`u128` outside `i64::MIN..=u64::MAX` (msgpack and Python's
/// serializer stop there), and for a value that nests deeper than
/// [`MAX_DEPTH`](super::msgpack::MAX_DEPTH) arrays, maps and extension values
/// (what the decoder would refuse), or through more than 512 nested
/// `Serialize` calls counting `Option`s and newtypes: the walk stops there
/// instead of recursing on. The reason names the failing field, e.g.
/// `` at `items[2].when`: ... ``.
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value> {
    value
        .serialize(ValueSerializer { level: Level::TOP })
        .map_err(BridgeError::into_error)
}

/// Builds a `T` from a [`Value`], consuming it (strings and buffers are moved,
/// not copied).
///
/// Integers and floats convert into each other where no information is lost
/// (`3.0` reads as an integer `3`, `3` as a float); structs read from maps (or
/// arrays, positionally); enums from a string (unit variant) or a one-entry
/// map `{variant: value}`.
///
/// ```
/// use checkpointer::serde::{from_value, Value};
///
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct S { a: i32, b: Vec<Option<bool>> }
///
/// let v = Value::map([("a", Value::Float(1.0)), ("b", Value::from(vec![Value::Bool(true), Value::Nil]))]);
/// assert_eq!(from_value::<S>(v).unwrap(), S { a: 1, b: vec![Some(true), None] });
/// ```
///
/// # Errors
/// [`Error::Serde`] when the value does not have the shape `T` expects, or
/// when reading it nests deeper than [`MAX_DEPTH`](super::msgpack::MAX_DEPTH)
/// arrays, maps and extension values (or 512 nested calls counting `Option`s
/// and newtypes); the reason names the failing field.
///
/// `value` is consumed: a value deeper than the limit is refused, then
/// dropped here, and dropping recurses once per level (see [`Value`]).
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T> {
    T::deserialize(De::top(Node::Owned(value))).map_err(BridgeError::into_error)
}

/// Builds a `T` from a borrowed [`Value`]; `T` may borrow strings and bytes
/// from it (`&str`, `&[u8]`).
///
/// # Errors
/// As [`from_value`].
pub fn from_value_ref<'de, T: Deserialize<'de>>(value: &'de Value) -> Result<T> {
    T::deserialize(De::top(Node::Borrowed(value))).map_err(BridgeError::into_error)
}

// ---------------------------------------------------------------------------
// Errors with a path
// ---------------------------------------------------------------------------

/// The bridge's serde error: a message plus the path to where it happened,
/// collected innermost first while the error travels up.
#[derive(Debug)]
pub(crate) struct BridgeError {
    msg: String,
    path: Vec<Seg>,
}

#[derive(Debug)]
enum Seg {
    Field(String),
    Index(usize),
}

impl BridgeError {
    fn new(msg: impl fmt::Display) -> Self {
        BridgeError {
            msg: msg.to_string(),
            path: Vec::new(),
        }
    }

    fn at(mut self, seg: Seg) -> Self {
        self.path.push(seg);
        self
    }

    fn at_key(self, key: &Value) -> Self {
        match key {
            Value::Str(s) => self.at(Seg::Field(s.as_str().to_owned())),
            Value::Int(i) => self.at(Seg::Field(i.to_string())),
            _ => self,
        }
    }

    fn into_error(self) -> Error {
        if self.path.is_empty() {
            return Error::serde(self.msg);
        }
        let mut path = String::new();
        for seg in self.path.iter().rev() {
            match seg {
                Seg::Field(name) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                }
                Seg::Index(i) => {
                    path.push('[');
                    path.push_str(&i.to_string());
                    path.push(']');
                }
            }
        }
        Error::serde(format!("at `{path}`: {}", self.msg))
    }
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for BridgeError {}

impl ser::Error for BridgeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        BridgeError::new(msg)
    }
}

impl de::Error for BridgeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        BridgeError::new(msg)
    }
}

type BResult<T> = std::result::Result<T, BridgeError>;

// ---------------------------------------------------------------------------
// Nesting bounds
// ---------------------------------------------------------------------------

/// The most nested calls the bridge makes into one value, counting `Option`s
/// and newtypes, which add no msgpack level: a type nesting through them
/// alone is bounded too, and up to three of them per array or map level fit.
const MAX_CALLS: usize = 4 * MAX_DEPTH;

/// Where the bridge is in the value it builds or reads: `depth` arrays, maps
/// and extension values around it (counted as the msgpack encoder counts
/// them, so the bridge refuses exactly what the decoder would), after `calls`
/// nested calls.
#[derive(Clone, Copy)]
struct Level {
    depth: usize,
    calls: usize,
}

fn too_deep() -> BridgeError {
    BridgeError::new(format!(
        "value nests deeper than the limit of {MAX_DEPTH} arrays, maps and extension values"
    ))
}

impl Level {
    const TOP: Level = Level { depth: 0, calls: 0 };

    /// The level of the elements of a container found at this level.
    fn container(self) -> BResult<Level> {
        if self.depth >= MAX_DEPTH {
            return Err(too_deep());
        }
        Ok(Level {
            depth: self.depth + 1,
            calls: self.call()?,
        })
    }

    /// The level of a value wrapped at this one (`Some`, a newtype).
    fn wrapped(self) -> BResult<Level> {
        Ok(Level {
            depth: self.depth,
            calls: self.call()?,
        })
    }

    fn call(self) -> BResult<usize> {
        if self.calls >= MAX_CALLS {
            return Err(BridgeError::new(format!(
                "value nests deeper than the limit of {MAX_DEPTH}: more than {MAX_CALLS} nested \
                 containers, options and newtypes"
            )));
        }
        Ok(self.calls + 1)
    }
}

thread_local! {
    /// How many arrays, maps and extension values `Value`'s own `Serialize`
    /// and `Deserialize` are inside on this thread, whatever the format.
    static VALUE_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// One level of [`VALUE_DEPTH`], left when dropped (also on an error or a
/// panic).
struct ValueLevel;

impl ValueLevel {
    /// Enters a level, or the reason when that would nest deeper than
    /// [`MAX_DEPTH`].
    fn enter() -> std::result::Result<ValueLevel, String> {
        VALUE_DEPTH.with(|d| {
            let depth = d.get();
            if depth >= MAX_DEPTH {
                return Err(format!("value nests deeper than the limit of {MAX_DEPTH}"));
            }
            d.set(depth + 1);
            Ok(ValueLevel)
        })
    }
}

impl Drop for ValueLevel {
    fn drop(&mut self) {
        VALUE_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

// ---------------------------------------------------------------------------
// Value: Serialize / Deserialize
// ---------------------------------------------------------------------------

impl Serialize for Value {
    fn serialize<S: ser::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Value::Nil => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::UInt(u) => s.serialize_u64(*u),
            Value::F32(f) => s.serialize_newtype_struct(F32_TOKEN, f),
            Value::Float(f) => s.serialize_f64(*f),
            Value::Str(v) => s.serialize_str(v),
            Value::Bin(b) => s.serialize_bytes(b),
            Value::Array(items) => {
                let _level = ValueLevel::enter().map_err(ser::Error::custom)?;
                s.collect_seq(items)
            }
            Value::Map(entries) => {
                use ser::SerializeMap;
                let _level = ValueLevel::enter().map_err(ser::Error::custom)?;
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            Value::Ext(ext) => {
                let _level = ValueLevel::enter().map_err(ser::Error::custom)?;
                s.serialize_newtype_struct(EXT_TOKEN, &ExtRepr(ext))
            }
        }
    }
}

thread_local! {
    /// Hand-over of an extension from `ExtRepr::serialize` to the bridge's
    /// serializer, which asked for it right before (see `ValueSerializer`).
    static CAPTURE: RefCell<Capture> = const { RefCell::new(Capture::Idle) };
}

enum Capture {
    Idle,
    Requested,
    Filled(Ext),
}

/// How an extension presents itself to serde: to the bridge it hands itself
/// over whole; to any other format it is the pair `(code, payload bytes)`.
struct ExtRepr<'a>(&'a Ext);

impl Serialize for ExtRepr<'_> {
    fn serialize<S: ser::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let captured = CAPTURE.with(|c| {
            let mut c = c.borrow_mut();
            if matches!(*c, Capture::Requested) {
                *c = Capture::Filled(self.0.clone());
                true
            } else {
                false
            }
        });
        if captured {
            return s.serialize_unit();
        }
        use ser::SerializeTuple;
        let payload: Bytes = match &self.0.payload {
            ExtPayload::Raw(raw) => raw.clone(),
            ExtPayload::Decoded(inner) => encode(inner).map_err(ser::Error::custom)?.into(),
        };
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&self.0.code)?;
        t.serialize_element(&BytesRepr(&payload))?;
        t.end()
    }
}

struct BytesRepr<'a>(&'a [u8]);

impl Serialize for BytesRepr<'_> {
    fn serialize<S: ser::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any msgpack value")
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> std::result::Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> std::result::Result<Value, E> {
        int128(v).map_err(E::custom)
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> std::result::Result<Value, E> {
        uint128(v).map_err(E::custom)
    }

    fn visit_f32<E>(self, v: f32) -> std::result::Result<Value, E> {
        Ok(Value::F32(v))
    }

    fn visit_f64<E>(self, v: f64) -> std::result::Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_char<E>(self, v: char) -> std::result::Result<Value, E> {
        Ok(Value::Str(v.into()))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<Value, E> {
        Ok(Value::Str(v.into()))
    }

    fn visit_string<E>(self, v: String) -> std::result::Result<Value, E> {
        Ok(Value::Str(v.into()))
    }

    fn visit_bytes<E>(self, v: &[u8]) -> std::result::Result<Value, E> {
        Ok(Value::Bin(Bytes::copy_from_slice(v)))
    }

    fn visit_byte_buf<E>(self, v: Vec<u8>) -> std::result::Result<Value, E> {
        Ok(Value::Bin(Bytes::from(v)))
    }

    fn visit_none<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Nil)
    }

    fn visit_unit<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Nil)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        // A format may nest `Some`s without bound: each counts as a level.
        let _level = ValueLevel::enter().map_err(de::Error::custom)?;
        Value::deserialize(d)
    }

    /// The bridge presents an extension as a newtype struct around
    /// `(code, payload)`; the payload is itself a newtype around the decoded
    /// value, or bytes.
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        let _level = ValueLevel::enter().map_err(de::Error::custom)?;
        d.deserialize_tuple(2, ExtVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let _level = ValueLevel::enter().map_err(de::Error::custom)?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items.into()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Value, A::Error> {
        let _level = ValueLevel::enter().map_err(de::Error::custom)?;
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Value::Map(entries.into()))
    }
}

struct ExtVisitor;

impl<'de> Visitor<'de> for ExtVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an extension (code, payload)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let code: i8 = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let payload = seq
            .next_element_seed(PayloadSeed { code })?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok(Value::Ext(Box::new(Ext { code, payload })))
    }
}

struct PayloadSeed {
    code: i8,
}

impl<'de> DeserializeSeed<'de> for PayloadSeed {
    type Value = ExtPayload;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<ExtPayload, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PayloadSeed {
    type Value = ExtPayload;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an extension payload")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> std::result::Result<ExtPayload, D::Error> {
        Ok(ExtPayload::Decoded(Box::new(Value::deserialize(d)?)))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> std::result::Result<ExtPayload, E> {
        Ok(Ext::raw(self.code, Bytes::copy_from_slice(v)).payload)
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> std::result::Result<ExtPayload, E> {
        Ok(Ext::raw(self.code, Bytes::from(v)).payload)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<ExtPayload, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element::<u8>()? {
            bytes.push(b);
        }
        Ok(Ext::raw(self.code, Bytes::from(bytes)).payload)
    }
}

/// Undoes what another serde format makes of an extension: the pair
/// `[code, payload bytes]` (bytes as bin or as an array of small integers)
/// becomes the extension again. Anything else is returned unchanged.
pub(crate) fn ext_from_pair(v: Value) -> Value {
    let Value::Array(items) = &v else { return v };
    let [Value::Int(code), payload] = items.as_slice() else {
        return v;
    };
    let Ok(code) = i8::try_from(*code) else { return v };
    let raw = match payload {
        Value::Bin(b) => b.clone(),
        Value::Array(bytes) => match bytes
            .iter()
            .map(|b| b.as_i64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
        {
            Some(raw) => Bytes::from(raw),
            None => return v,
        },
        _ => return v,
    };
    Value::Ext(Box::new(Ext::raw(code, raw)))
}

fn int128(v: i128) -> Result<Value> {
    if let Ok(i) = i64::try_from(v) {
        Ok(Value::Int(i))
    } else if let Ok(u) = u64::try_from(v) {
        Ok(Value::UInt(u))
    } else {
        Err(Error::serde(format!(
            "integer {v} is outside the msgpack range -2^63..2^64-1"
        )))
    }
}

fn uint128(v: u128) -> Result<Value> {
    u64::try_from(v)
        .map(Value::from)
        .map_err(|_| Error::serde(format!("integer {v} is outside the msgpack range -2^63..2^64-1")))
}

// ---------------------------------------------------------------------------
// Serializer: T -> Value
// ---------------------------------------------------------------------------

/// Builds the [`Value`] found at `level`.
struct ValueSerializer {
    level: Level,
}

impl ValueSerializer {
    /// The serializer of a value wrapped in this one (`Some`, a newtype).
    fn wrapped(self) -> BResult<ValueSerializer> {
        Ok(ValueSerializer {
            level: self.level.wrapped()?,
        })
    }
}

/// Resets the capture slot however the serialization inside it ends.
struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURE.with(|c| *c.borrow_mut() = Capture::Idle);
    }
}

impl ser::Serializer for ValueSerializer {
    type Ok = Value;
    type Error = BridgeError;
    type SerializeSeq = SeqBuilder;
    type SerializeTuple = SeqBuilder;
    type SerializeTupleStruct = SeqBuilder;
    type SerializeTupleVariant = VariantBuilder<SeqBuilder>;
    type SerializeMap = MapBuilder;
    type SerializeStruct = MapBuilder;
    type SerializeStructVariant = VariantBuilder<MapBuilder>;

    fn serialize_bool(self, v: bool) -> BResult<Value> {
        Ok(Value::Bool(v))
    }

    fn serialize_i8(self, v: i8) -> BResult<Value> {
        Ok(Value::Int(v.into()))
    }

    fn serialize_i16(self, v: i16) -> BResult<Value> {
        Ok(Value::Int(v.into()))
    }

    fn serialize_i32(self, v: i32) -> BResult<Value> {
        Ok(Value::Int(v.into()))
    }

    fn serialize_i64(self, v: i64) -> BResult<Value> {
        Ok(Value::Int(v))
    }

    fn serialize_i128(self, v: i128) -> BResult<Value> {
        int128(v).map_err(|e| BridgeError::new(reason(e)))
    }

    fn serialize_u8(self, v: u8) -> BResult<Value> {
        Ok(Value::Int(v.into()))
    }

    fn serialize_u16(self, v: u16) -> BResult<Value> {
        Ok(Value::Int(v.into()))
    }

    fn serialize_u32(self, v: u32) -> BResult<Value> {
        Ok(Value::Int(v.into()))
    }

    fn serialize_u64(self, v: u64) -> BResult<Value> {
        Ok(Value::from(v))
    }

    fn serialize_u128(self, v: u128) -> BResult<Value> {
        uint128(v).map_err(|e| BridgeError::new(reason(e)))
    }

    fn serialize_f32(self, v: f32) -> BResult<Value> {
        Ok(Value::Float(v.into()))
    }

    fn serialize_f64(self, v: f64) -> BResult<Value> {
        Ok(Value::Float(v))
    }

    fn serialize_char(self, v: char) -> BResult<Value> {
        Ok(Value::Str(v.into()))
    }

    fn serialize_str(self, v: &str) -> BResult<Value> {
        Ok(Value::Str(v.into()))
    }

    fn serialize_bytes(self, v: &[u8]) -> BResult<Value> {
        Ok(Value::Bin(Bytes::copy_from_slice(v)))
    }

    fn serialize_none(self) -> BResult<Value> {
        Ok(Value::Nil)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> BResult<Value> {
        value.serialize(self.wrapped()?)
    }

    fn serialize_unit(self) -> BResult<Value> {
        Ok(Value::Nil)
    }

    fn serialize_unit_struct(self, _name: &'static str) -> BResult<Value> {
        Ok(Value::Nil)
    }

    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> BResult<Value> {
        Ok(Value::Str(variant.into()))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> BResult<Value> {
        match name {
            EXT_TOKEN => {
                let _guard = CaptureGuard;
                CAPTURE.with(|c| *c.borrow_mut() = Capture::Requested);
                value.serialize(ValueSerializer { level: self.level })?;
                match CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), Capture::Idle)) {
                    Capture::Filled(ext) => Ok(Value::Ext(Box::new(ext))),
                    _ => Err(BridgeError::new(format!("the newtype name {EXT_TOKEN:?} is reserved"))),
                }
            }
            F32_TOKEN => match value.serialize(ValueSerializer { level: self.level })? {
                // Exact: the f64 was widened from this f32 just now.
                Value::Float(f) => Ok(Value::F32(f as f32)),
                _ => Err(BridgeError::new(format!("the newtype name {F32_TOKEN:?} is reserved"))),
            },
            _ => value.serialize(self.wrapped()?),
        }
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> BResult<Value> {
        let level = self.level.container()?;
        let inner = value
            .serialize(ValueSerializer { level })
            .map_err(|e| e.at(Seg::Field(variant.to_owned())))?;
        Ok(Value::Map(vec![(Value::Str(variant.into()), inner)].into()))
    }

    fn serialize_seq(self, len: Option<usize>) -> BResult<SeqBuilder> {
        SeqBuilder::new(len, self.level)
    }

    fn serialize_tuple(self, len: usize) -> BResult<SeqBuilder> {
        SeqBuilder::new(Some(len), self.level)
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> BResult<SeqBuilder> {
        SeqBuilder::new(Some(len), self.level)
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> BResult<VariantBuilder<SeqBuilder>> {
        // `{variant: [..]}`: the list sits inside a map.
        Ok(VariantBuilder {
            variant,
            inner: SeqBuilder::new(Some(len), self.level.container()?)?,
        })
    }

    fn serialize_map(self, len: Option<usize>) -> BResult<MapBuilder> {
        MapBuilder::new(len, self.level)
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> BResult<MapBuilder> {
        MapBuilder::new(Some(len), self.level)
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> BResult<VariantBuilder<MapBuilder>> {
        Ok(VariantBuilder {
            variant,
            inner: MapBuilder::new(Some(len), self.level.container()?)?,
        })
    }

    fn collect_str<T: fmt::Display + ?Sized>(self, value: &T) -> BResult<Value> {
        Ok(Value::Str(value.to_string().into()))
    }
}

fn reason(e: Error) -> String {
    match e {
        Error::Serde { reason } => reason,
        other => other.to_string(),
    }
}

struct SeqBuilder {
    items: Vec<Value>,
    /// The level of the elements.
    level: Level,
}

impl SeqBuilder {
    /// A list found at `level`.
    fn new(len: Option<usize>, level: Level) -> BResult<Self> {
        Ok(SeqBuilder {
            items: Vec::with_capacity(len.unwrap_or(0).min(4096)),
            level: level.container()?,
        })
    }

    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        let index = self.items.len();
        let v = value
            .serialize(ValueSerializer { level: self.level })
            .map_err(|e| e.at(Seg::Index(index)))?;
        self.items.push(v);
        Ok(())
    }
}

impl ser::SerializeSeq for SeqBuilder {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        self.push(value)
    }

    fn end(self) -> BResult<Value> {
        Ok(Value::Array(self.items.into()))
    }
}

impl ser::SerializeTuple for SeqBuilder {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        self.push(value)
    }

    fn end(self) -> BResult<Value> {
        Ok(Value::Array(self.items.into()))
    }
}

impl ser::SerializeTupleStruct for SeqBuilder {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        self.push(value)
    }

    fn end(self) -> BResult<Value> {
        Ok(Value::Array(self.items.into()))
    }
}

struct MapBuilder {
    entries: Vec<(Value, Value)>,
    key: Option<Value>,
    /// The level of the keys and values.
    level: Level,
}

impl MapBuilder {
    /// A map found at `level`.
    fn new(len: Option<usize>, level: Level) -> BResult<Self> {
        Ok(MapBuilder {
            entries: Vec::with_capacity(len.unwrap_or(0).min(4096)),
            key: None,
            level: level.container()?,
        })
    }

    fn field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> BResult<()> {
        let v = value
            .serialize(ValueSerializer { level: self.level })
            .map_err(|e| e.at(Seg::Field(name.to_owned())))?;
        self.entries.push((Value::Str(name.into()), v));
        Ok(())
    }
}

impl ser::SerializeMap for MapBuilder {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> BResult<()> {
        self.key = Some(key.serialize(ValueSerializer { level: self.level })?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        let key = self
            .key
            .take()
            .ok_or_else(|| BridgeError::new("map value serialized before its key"))?;
        let v = value
            .serialize(ValueSerializer { level: self.level })
            .map_err(|e| e.at_key(&key))?;
        self.entries.push((key, v));
        Ok(())
    }

    fn end(self) -> BResult<Value> {
        Ok(Value::Map(self.entries.into()))
    }
}

impl ser::SerializeStruct for MapBuilder {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> BResult<()> {
        self.field(name, value)
    }

    fn end(self) -> BResult<Value> {
        Ok(Value::Map(self.entries.into()))
    }
}

/// A tuple or struct variant: `{variant: [..]}` / `{variant: {..}}`.
struct VariantBuilder<B> {
    variant: &'static str,
    inner: B,
}

impl<B> VariantBuilder<B> {
    fn wrap(variant: &'static str, inner: Value) -> Value {
        Value::Map(vec![(Value::Str(variant.into()), inner)].into())
    }
}

impl ser::SerializeTupleVariant for VariantBuilder<SeqBuilder> {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        let variant = self.variant;
        self.inner.push(value).map_err(|e| e.at(Seg::Field(variant.to_owned())))
    }

    fn end(self) -> BResult<Value> {
        Ok(Self::wrap(self.variant, Value::Array(self.inner.items.into())))
    }
}

impl ser::SerializeStructVariant for VariantBuilder<MapBuilder> {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> BResult<()> {
        let variant = self.variant;
        self.inner
            .field(name, value)
            .map_err(|e| e.at(Seg::Field(variant.to_owned())))
    }

    fn end(self) -> BResult<Value> {
        Ok(Self::wrap(self.variant, Value::Map(self.inner.entries.into())))
    }
}

// ---------------------------------------------------------------------------
// Deserializer: Value -> T
// ---------------------------------------------------------------------------

/// A value to read from, owned (moved out) or borrowed for `'de`.
enum Node<'de> {
    Owned(Value),
    Borrowed(&'de Value),
}

/// Reads the value `node`, found at `level`.
struct De<'de> {
    node: Node<'de>,
    level: Level,
}

impl<'de> De<'de> {
    fn top(node: Node<'de>) -> Self {
        De {
            node,
            level: Level::TOP,
        }
    }

    fn value(&self) -> &Value {
        match &self.node {
            Node::Owned(v) => v,
            Node::Borrowed(v) => v,
        }
    }

    fn invalid(&self, exp: &dyn Expected) -> BridgeError {
        de::Error::invalid_type(unexpected(self.value()), exp)
    }

    /// The level inside this value, when it is an array, a map or an
    /// extension (checked before anything is moved out of it).
    fn inner_level(&self) -> BResult<Level> {
        match self.value() {
            Value::Array(_) | Value::Map(_) | Value::Ext(_) => self.level.container(),
            _ => Ok(self.level),
        }
    }

    /// This value read again by a wrapping type (`Option`, a newtype).
    fn wrapped(self) -> BResult<Self> {
        Ok(De {
            node: self.node,
            level: self.level.wrapped()?,
        })
    }

    fn visit<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        let level = self.inner_level()?;
        match self.node {
            Node::Owned(v) => match v {
                Value::Str(s) => visitor.visit_string(s.into_string()),
                Value::Bin(b) => visitor.visit_byte_buf(Vec::from(b)),
                Value::Array(items) => visit_seq(Items::Owned(items.into_iter()), level, visitor),
                Value::Map(entries) => visit_map(Entries::Owned(entries.into_iter()), level, visitor),
                Value::Ext(ext) => visitor.visit_newtype_struct(ExtDe {
                    node: ExtNode::Owned(*ext),
                    level,
                }),
                scalar => visit_scalar(&scalar, visitor),
            },
            Node::Borrowed(v) => match v {
                Value::Str(s) => visitor.visit_borrowed_str(s),
                Value::Bin(b) => visitor.visit_borrowed_bytes(b),
                Value::Array(items) => visit_seq(Items::Borrowed(items.iter()), level, visitor),
                Value::Map(entries) => visit_map(Entries::Borrowed(entries.iter()), level, visitor),
                Value::Ext(ext) => visitor.visit_newtype_struct(ExtDe {
                    node: ExtNode::Borrowed(ext),
                    level,
                }),
                scalar => visit_scalar(scalar, visitor),
            },
        }
    }

    fn integer<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        let float = match *self.value() {
            Value::Int(i) => return visitor.visit_i64(i),
            Value::UInt(u) => return visitor.visit_u64(u),
            Value::Float(f) => f,
            Value::F32(f) => f64::from(f),
            _ => return Err(self.invalid(&visitor)),
        };
        match exact_int(float) {
            Some(Value::Int(i)) => visitor.visit_i64(i),
            Some(Value::UInt(u)) => visitor.visit_u64(u),
            _ => Err(de::Error::invalid_value(Unexpected::Float(float), &visitor)),
        }
    }

    fn float<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        match *self.value() {
            Value::Float(f) => visitor.visit_f64(f),
            Value::F32(f) => visitor.visit_f32(f),
            Value::Int(i) if (i as f64) as i128 == i128::from(i) => visitor.visit_f64(i as f64),
            Value::UInt(u) if (u as f64) as u128 == u128::from(u) => visitor.visit_f64(u as f64),
            Value::Int(i) => Err(de::Error::invalid_value(
                Unexpected::Signed(i),
                &"an integer a float holds exactly",
            )),
            Value::UInt(u) => Err(de::Error::invalid_value(
                Unexpected::Unsigned(u),
                &"an integer a float holds exactly",
            )),
            _ => Err(self.invalid(&visitor)),
        }
    }
}

/// The integer a float holds exactly, if it is in msgpack's integer range.
fn exact_int(f: f64) -> Option<Value> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const TWO_64: f64 = 18_446_744_073_709_551_616.0;
    if !f.is_finite() || f.fract() != 0.0 {
        None
    } else if (-TWO_63..TWO_63).contains(&f) {
        Some(Value::Int(f as i64))
    } else if (0.0..TWO_64).contains(&f) {
        Some(Value::UInt(f as u64))
    } else {
        None
    }
}

fn visit_scalar<'de, V: Visitor<'de>>(v: &Value, visitor: V) -> BResult<V::Value> {
    match *v {
        Value::Nil => visitor.visit_unit(),
        Value::Bool(b) => visitor.visit_bool(b),
        Value::Int(i) => visitor.visit_i64(i),
        Value::UInt(u) => visitor.visit_u64(u),
        Value::F32(f) => visitor.visit_f32(f),
        Value::Float(f) => visitor.visit_f64(f),
        _ => Err(de::Error::invalid_type(unexpected(v), &visitor)),
    }
}

fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Nil => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Int(i) => Unexpected::Signed(*i),
        Value::UInt(u) => Unexpected::Unsigned(*u),
        Value::F32(f) => Unexpected::Float(f64::from(*f)),
        Value::Float(f) => Unexpected::Float(*f),
        Value::Str(s) => Unexpected::Str(s),
        Value::Bin(b) => Unexpected::Bytes(b),
        Value::Array(_) => Unexpected::Seq,
        Value::Map(_) => Unexpected::Map,
        Value::Ext(_) => Unexpected::Other("a Python object (msgpack extension)"),
    }
}

fn visit_seq<'de, V: Visitor<'de>>(items: Items<'de>, level: Level, visitor: V) -> BResult<V::Value> {
    let len = items.len();
    let mut seq = SeqDe { items, index: 0, level };
    let out = visitor.visit_seq(&mut seq)?;
    if seq.items.len() != 0 {
        return Err(de::Error::invalid_length(len, &"fewer elements in the array"));
    }
    Ok(out)
}

fn visit_map<'de, V: Visitor<'de>>(entries: Entries<'de>, level: Level, visitor: V) -> BResult<V::Value> {
    let len = entries.len();
    let mut map = MapDe {
        entries,
        pending: None,
        level,
    };
    let out = visitor.visit_map(&mut map)?;
    if map.entries.len() != 0 {
        return Err(de::Error::invalid_length(len, &"fewer entries in the map"));
    }
    Ok(out)
}

impl<'de> Deserializer<'de> for De<'de> {
    type Error = BridgeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.visit(visitor)
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.integer(visitor)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.float(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.float(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        match self.value() {
            Value::Nil => visitor.visit_none(),
            _ => visitor.visit_some(self.wrapped()?),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> BResult<V::Value> {
        visitor.visit_newtype_struct(self.wrapped()?)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        // A bin reads as a sequence of bytes, so `Vec<u8>` fields accept it.
        match self.node {
            Node::Owned(Value::Bin(b)) => {
                let mut seq = SeqDeserializer::new(Vec::from(b).into_iter());
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Node::Borrowed(Value::Bin(b)) => {
                let mut seq = SeqDeserializer::new(b.iter().copied());
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            node => De {
                node,
                level: self.level,
            }
            .visit(visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> BResult<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> BResult<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> BResult<V::Value> {
        let inner = self.inner_level()?;
        let (variant, value) = match self.node {
            Node::Owned(Value::Map(entries)) if entries.len() == 1 => {
                let mut it = entries.into_iter();
                match it.next() {
                    Some((k, v)) => (Node::Owned(k), Some(Node::Owned(v))),
                    None => return Err(BridgeError::new("empty enum map")),
                }
            }
            Node::Borrowed(Value::Map(entries)) if entries.len() == 1 => {
                (Node::Borrowed(&entries[0].0), Some(Node::Borrowed(&entries[0].1)))
            }
            node @ (Node::Owned(Value::Str(_)) | Node::Borrowed(Value::Str(_))) => (node, None),
            node => {
                let de = De {
                    node,
                    level: self.level,
                };
                return Err(de.invalid(&"a variant name or a map with exactly one entry {variant: value}"));
            }
        };
        visitor.visit_enum(EnumDe {
            variant,
            value,
            level: inner,
        })
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool char str string bytes byte_buf unit unit_struct map struct identifier
    }
}

impl<'de> IntoDeserializer<'de, BridgeError> for De<'de> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

enum Items<'de> {
    Owned(std::vec::IntoIter<Value>),
    Borrowed(std::slice::Iter<'de, Value>),
}

impl<'de> Items<'de> {
    fn len(&self) -> usize {
        match self {
            Items::Owned(it) => it.len(),
            Items::Borrowed(it) => it.len(),
        }
    }

    fn next(&mut self) -> Option<Node<'de>> {
        match self {
            Items::Owned(it) => it.next().map(Node::Owned),
            Items::Borrowed(it) => it.next().map(Node::Borrowed),
        }
    }
}

struct SeqDe<'de> {
    items: Items<'de>,
    index: usize,
    /// The level of the elements.
    level: Level,
}

impl<'de> SeqAccess<'de> for SeqDe<'de> {
    type Error = BridgeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> BResult<Option<T::Value>> {
        match self.items.next() {
            Some(node) => {
                let index = self.index;
                self.index += 1;
                seed.deserialize(De {
                    node,
                    level: self.level,
                })
                .map(Some)
                .map_err(|e| e.at(Seg::Index(index)))
            }
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

enum Entries<'de> {
    Owned(std::vec::IntoIter<(Value, Value)>),
    Borrowed(std::slice::Iter<'de, (Value, Value)>),
}

impl Entries<'_> {
    fn len(&self) -> usize {
        match self {
            Entries::Owned(it) => it.len(),
            Entries::Borrowed(it) => it.len(),
        }
    }
}

struct MapDe<'de> {
    entries: Entries<'de>,
    /// The value of the entry whose key was just read, with the key's path
    /// segment for errors.
    pending: Option<(Node<'de>, Option<Seg>)>,
    /// The level of the keys and values.
    level: Level,
}

fn key_seg(key: &Value) -> Option<Seg> {
    match key {
        Value::Str(s) => Some(Seg::Field(s.as_str().to_owned())),
        Value::Int(i) => Some(Seg::Field(i.to_string())),
        _ => None,
    }
}

impl<'de> MapAccess<'de> for MapDe<'de> {
    type Error = BridgeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> BResult<Option<K::Value>> {
        let (key, value) = match &mut self.entries {
            Entries::Owned(it) => match it.next() {
                Some((k, v)) => (Node::Owned(k), Node::Owned(v)),
                None => return Ok(None),
            },
            Entries::Borrowed(it) => match it.next() {
                Some((k, v)) => (Node::Borrowed(k), Node::Borrowed(v)),
                None => return Ok(None),
            },
        };
        let seg = key_seg(node_value(&key));
        self.pending = Some((value, seg));
        seed.deserialize(De {
            node: key,
            level: self.level,
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> BResult<V::Value> {
        let (value, seg) = self
            .pending
            .take()
            .ok_or_else(|| BridgeError::new("map value read before its key"))?;
        let de = De {
            node: value,
            level: self.level,
        };
        seed.deserialize(de).map_err(|e| match seg {
            Some(seg) => e.at(seg),
            None => e,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct EnumDe<'de> {
    variant: Node<'de>,
    value: Option<Node<'de>>,
    /// The level of the variant name and value.
    level: Level,
}

impl<'de> EnumAccess<'de> for EnumDe<'de> {
    type Error = BridgeError;
    type Variant = VariantDe<'de>;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> BResult<(T::Value, VariantDe<'de>)> {
        let seg = key_seg(node_value(&self.variant));
        let level = self.level;
        let variant = seed.deserialize(De {
            node: self.variant,
            level,
        })?;
        Ok((
            variant,
            VariantDe {
                value: self.value,
                seg,
                level,
            },
        ))
    }
}

struct VariantDe<'de> {
    value: Option<Node<'de>>,
    seg: Option<Seg>,
    level: Level,
}

impl VariantDe<'_> {
    fn locate(seg: Option<Seg>) -> impl FnOnce(BridgeError) -> BridgeError {
        move |e| match seg {
            Some(seg) => e.at(seg),
            None => e,
        }
    }
}

impl<'de> VariantAccess<'de> for VariantDe<'de> {
    type Error = BridgeError;

    fn unit_variant(self) -> BResult<()> {
        match self.value {
            None => Ok(()),
            Some(node) => match node_value(&node) {
                Value::Nil => Ok(()),
                other => Err(de::Error::invalid_type(unexpected(other), &"unit variant")),
            },
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> BResult<T::Value> {
        match self.value {
            Some(node) => seed
                .deserialize(De {
                    node,
                    level: self.level,
                })
                .map_err(Self::locate(self.seg)),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &"newtype variant")),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> BResult<V::Value> {
        match self.value {
            Some(node) => De {
                node,
                level: self.level,
            }
            .deserialize_seq(visitor)
            .map_err(Self::locate(self.seg)),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &"tuple variant")),
        }
    }

    fn struct_variant<V: Visitor<'de>>(self, _fields: &'static [&'static str], visitor: V) -> BResult<V::Value> {
        match self.value {
            Some(node) => De {
                node,
                level: self.level,
            }
            .visit(visitor)
            .map_err(Self::locate(self.seg)),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &"struct variant")),
        }
    }
}

fn node_value<'a>(node: &'a Node<'_>) -> &'a Value {
    match node {
        Node::Owned(v) => v,
        Node::Borrowed(v) => v,
    }
}

/// An extension presented to a visitor: the sequence `(code, payload)`.
enum ExtNode<'de> {
    Owned(Ext),
    Borrowed(&'de Ext),
}

/// An extension; `level` is the level of its payload.
struct ExtDe<'de> {
    node: ExtNode<'de>,
    level: Level,
}

impl<'de> Deserializer<'de> for ExtDe<'de> {
    type Error = BridgeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        let (code, payload) = match self.node {
            ExtNode::Owned(ext) => (ext.code, PayloadNode::Owned(ext.payload)),
            ExtNode::Borrowed(ext) => (ext.code, PayloadNode::Borrowed(&ext.payload)),
        };
        visitor.visit_seq(ExtSeq {
            code: Some(code),
            payload: Some(payload),
            level: self.level,
        })
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct ExtSeq<'de> {
    code: Option<i8>,
    payload: Option<PayloadNode<'de>>,
    level: Level,
}

impl<'de> SeqAccess<'de> for ExtSeq<'de> {
    type Error = BridgeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> BResult<Option<T::Value>> {
        if let Some(code) = self.code.take() {
            return seed.deserialize(code.into_deserializer()).map(Some);
        }
        match self.payload.take() {
            Some(payload) => seed
                .deserialize(PayloadDe {
                    node: payload,
                    level: self.level,
                })
                .map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(usize::from(self.code.is_some()) + usize::from(self.payload.is_some()))
    }
}

enum PayloadNode<'de> {
    Owned(ExtPayload),
    Borrowed(&'de ExtPayload),
}

struct PayloadDe<'de> {
    node: PayloadNode<'de>,
    level: Level,
}

impl<'de> Deserializer<'de> for PayloadDe<'de> {
    type Error = BridgeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        let level = self.level;
        match self.node {
            PayloadNode::Owned(ExtPayload::Raw(raw)) => visitor.visit_byte_buf(Vec::from(raw)),
            PayloadNode::Borrowed(ExtPayload::Raw(raw)) => visitor.visit_borrowed_bytes(raw),
            PayloadNode::Owned(ExtPayload::Decoded(inner)) => visitor.visit_newtype_struct(De {
                node: Node::Owned(*inner),
                level,
            }),
            PayloadNode::Borrowed(ExtPayload::Decoded(inner)) => visitor.visit_newtype_struct(De {
                node: Node::Borrowed(inner),
                level,
            }),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}
