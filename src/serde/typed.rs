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

use std::cell::RefCell;
use std::fmt;

use ::serde::de::{
    self, value::SeqDeserializer, DeserializeOwned, DeserializeSeed, EnumAccess, Expected, IntoDeserializer, MapAccess,
    SeqAccess, Unexpected, VariantAccess, Visitor,
};
use ::serde::ser::{self, Serialize};
use ::serde::{forward_to_deserialize_any, Deserialize, Deserializer};
use bytes::Bytes;

use super::msgpack_codec::encode;
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
/// serializer stop there). The reason names the failing field, e.g.
/// `` at `items[2].when`: ... ``.
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value> {
    value.serialize(ValueSerializer).map_err(BridgeError::into_error)
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
/// [`Error::Serde`] when the value does not have the shape `T` expects; the
/// reason names the failing field.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T> {
    T::deserialize(De(Node::Owned(value))).map_err(BridgeError::into_error)
}

/// Builds a `T` from a borrowed [`Value`]; `T` may borrow strings and bytes
/// from it (`&str`, `&[u8]`).
///
/// # Errors
/// As [`from_value`].
pub fn from_value_ref<'de, T: Deserialize<'de>>(value: &'de Value) -> Result<T> {
    T::deserialize(De(Node::Borrowed(value))).map_err(BridgeError::into_error)
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
            Value::Array(items) => s.collect_seq(items),
            Value::Map(entries) => {
                use ser::SerializeMap;
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            Value::Ext(ext) => s.serialize_newtype_struct(EXT_TOKEN, &ExtRepr(ext)),
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
        Value::deserialize(d)
    }

    /// The bridge presents an extension as a newtype struct around
    /// `(code, payload)`; the payload is itself a newtype around the decoded
    /// value, or bytes.
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_tuple(2, ExtVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items.into()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Value, A::Error> {
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

struct ValueSerializer;

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
        value.serialize(self)
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
                value.serialize(ValueSerializer)?;
                match CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), Capture::Idle)) {
                    Capture::Filled(ext) => Ok(Value::Ext(Box::new(ext))),
                    _ => Err(BridgeError::new(format!("the newtype name {EXT_TOKEN:?} is reserved"))),
                }
            }
            F32_TOKEN => match value.serialize(ValueSerializer)? {
                // Exact: the f64 was widened from this f32 just now.
                Value::Float(f) => Ok(Value::F32(f as f32)),
                _ => Err(BridgeError::new(format!("the newtype name {F32_TOKEN:?} is reserved"))),
            },
            _ => value.serialize(self),
        }
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> BResult<Value> {
        let inner = value
            .serialize(ValueSerializer)
            .map_err(|e| e.at(Seg::Field(variant.to_owned())))?;
        Ok(Value::Map(vec![(Value::Str(variant.into()), inner)].into()))
    }

    fn serialize_seq(self, len: Option<usize>) -> BResult<SeqBuilder> {
        Ok(SeqBuilder::new(len))
    }

    fn serialize_tuple(self, len: usize) -> BResult<SeqBuilder> {
        Ok(SeqBuilder::new(Some(len)))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> BResult<SeqBuilder> {
        Ok(SeqBuilder::new(Some(len)))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> BResult<VariantBuilder<SeqBuilder>> {
        Ok(VariantBuilder {
            variant,
            inner: SeqBuilder::new(Some(len)),
        })
    }

    fn serialize_map(self, len: Option<usize>) -> BResult<MapBuilder> {
        Ok(MapBuilder::new(len))
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> BResult<MapBuilder> {
        Ok(MapBuilder::new(Some(len)))
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
            inner: MapBuilder::new(Some(len)),
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
}

impl SeqBuilder {
    fn new(len: Option<usize>) -> Self {
        SeqBuilder {
            items: Vec::with_capacity(len.unwrap_or(0).min(4096)),
        }
    }

    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        let index = self.items.len();
        let v = value.serialize(ValueSerializer).map_err(|e| e.at(Seg::Index(index)))?;
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
}

impl MapBuilder {
    fn new(len: Option<usize>) -> Self {
        MapBuilder {
            entries: Vec::with_capacity(len.unwrap_or(0).min(4096)),
            key: None,
        }
    }

    fn field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> BResult<()> {
        let v = value
            .serialize(ValueSerializer)
            .map_err(|e| e.at(Seg::Field(name.to_owned())))?;
        self.entries.push((Value::Str(name.into()), v));
        Ok(())
    }
}

impl ser::SerializeMap for MapBuilder {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> BResult<()> {
        self.key = Some(key.serialize(ValueSerializer)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        let key = self
            .key
            .take()
            .ok_or_else(|| BridgeError::new("map value serialized before its key"))?;
        let v = value.serialize(ValueSerializer).map_err(|e| e.at_key(&key))?;
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

struct De<'de>(Node<'de>);

impl<'de> De<'de> {
    fn value(&self) -> &Value {
        match &self.0 {
            Node::Owned(v) => v,
            Node::Borrowed(v) => v,
        }
    }

    fn invalid(&self, exp: &dyn Expected) -> BridgeError {
        de::Error::invalid_type(unexpected(self.value()), exp)
    }

    fn visit<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        match self.0 {
            Node::Owned(v) => match v {
                Value::Str(s) => visitor.visit_string(s.into_string()),
                Value::Bin(b) => visitor.visit_byte_buf(Vec::from(b)),
                Value::Array(items) => visit_seq(Items::Owned(items.into_iter()), visitor),
                Value::Map(entries) => visit_map(Entries::Owned(entries.into_iter()), visitor),
                Value::Ext(ext) => visitor.visit_newtype_struct(ExtDe(ExtNode::Owned(*ext))),
                scalar => visit_scalar(&scalar, visitor),
            },
            Node::Borrowed(v) => match v {
                Value::Str(s) => visitor.visit_borrowed_str(s),
                Value::Bin(b) => visitor.visit_borrowed_bytes(b),
                Value::Array(items) => visit_seq(Items::Borrowed(items.iter()), visitor),
                Value::Map(entries) => visit_map(Entries::Borrowed(entries.iter()), visitor),
                Value::Ext(ext) => visitor.visit_newtype_struct(ExtDe(ExtNode::Borrowed(ext))),
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

fn visit_seq<'de, V: Visitor<'de>>(items: Items<'de>, visitor: V) -> BResult<V::Value> {
    let len = items.len();
    let mut seq = SeqDe { items, index: 0 };
    let out = visitor.visit_seq(&mut seq)?;
    if seq.items.len() != 0 {
        return Err(de::Error::invalid_length(len, &"fewer elements in the array"));
    }
    Ok(out)
}

fn visit_map<'de, V: Visitor<'de>>(entries: Entries<'de>, visitor: V) -> BResult<V::Value> {
    let len = entries.len();
    let mut map = MapDe { entries, pending: None };
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
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> BResult<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        // A bin reads as a sequence of bytes, so `Vec<u8>` fields accept it.
        match self.0 {
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
            node => De(node).visit(visitor),
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
        let (variant, value) = match self.0 {
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
                return Err(De(node).invalid(&"a variant name or a map with exactly one entry {variant: value}"));
            }
        };
        visitor.visit_enum(EnumDe { variant, value })
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
}

impl<'de> SeqAccess<'de> for SeqDe<'de> {
    type Error = BridgeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> BResult<Option<T::Value>> {
        match self.items.next() {
            Some(node) => {
                let index = self.index;
                self.index += 1;
                seed.deserialize(De(node))
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
        seed.deserialize(De(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> BResult<V::Value> {
        let (value, seg) = self
            .pending
            .take()
            .ok_or_else(|| BridgeError::new("map value read before its key"))?;
        seed.deserialize(De(value)).map_err(|e| match seg {
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
}

impl<'de> EnumAccess<'de> for EnumDe<'de> {
    type Error = BridgeError;
    type Variant = VariantDe<'de>;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> BResult<(T::Value, VariantDe<'de>)> {
        let seg = key_seg(node_value(&self.variant));
        let variant = seed.deserialize(De(self.variant))?;
        Ok((variant, VariantDe { value: self.value, seg }))
    }
}

struct VariantDe<'de> {
    value: Option<Node<'de>>,
    seg: Option<Seg>,
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
            Some(node) => seed.deserialize(De(node)).map_err(Self::locate(self.seg)),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &"newtype variant")),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> BResult<V::Value> {
        match self.value {
            Some(node) => De(node).deserialize_seq(visitor).map_err(Self::locate(self.seg)),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &"tuple variant")),
        }
    }

    fn struct_variant<V: Visitor<'de>>(self, _fields: &'static [&'static str], visitor: V) -> BResult<V::Value> {
        match self.value {
            Some(node) => De(node).visit(visitor).map_err(Self::locate(self.seg)),
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

struct ExtDe<'de>(ExtNode<'de>);

impl<'de> Deserializer<'de> for ExtDe<'de> {
    type Error = BridgeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        let (code, payload) = match self.0 {
            ExtNode::Owned(ext) => (ext.code, PayloadNode::Owned(ext.payload)),
            ExtNode::Borrowed(ext) => (ext.code, PayloadNode::Borrowed(&ext.payload)),
        };
        visitor.visit_seq(ExtSeq {
            code: Some(code),
            payload: Some(payload),
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
}

impl<'de> SeqAccess<'de> for ExtSeq<'de> {
    type Error = BridgeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> BResult<Option<T::Value>> {
        if let Some(code) = self.code.take() {
            return seed.deserialize(code.into_deserializer()).map(Some);
        }
        match self.payload.take() {
            Some(payload) => seed.deserialize(PayloadDe(payload)).map(Some),
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

struct PayloadDe<'de>(PayloadNode<'de>);

impl<'de> Deserializer<'de> for PayloadDe<'de> {
    type Error = BridgeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        match self.0 {
            PayloadNode::Owned(ExtPayload::Raw(raw)) => visitor.visit_byte_buf(Vec::from(raw)),
            PayloadNode::Borrowed(ExtPayload::Raw(raw)) => visitor.visit_borrowed_bytes(raw),
            PayloadNode::Owned(ExtPayload::Decoded(inner)) => visitor.visit_newtype_struct(De(Node::Owned(*inner))),
            PayloadNode::Borrowed(ExtPayload::Decoded(inner)) => {
                visitor.visit_newtype_struct(De(Node::Borrowed(inner)))
            }
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}
