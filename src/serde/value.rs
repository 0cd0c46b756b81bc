//! The dynamic value stored in channels, writes and metadata.

use bytes::Bytes;

/// A msgpack value as LangGraph stores it.
///
/// Maps keep their entries in order and accept any key type, as Python's
/// serializer does. Decoding Python's bytes into a `Value` and encoding it again
/// gives back the same bytes (see [`crate::serde::msgpack`]).
///
/// Integers: non-negative values up to `i64::MAX` and all negative values are
/// [`Value::Int`]; only values above `i64::MAX` use [`Value::UInt`]. The `From`
/// conversions keep to this rule.
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
    /// A UTF-8 string.
    Str(String),
    /// Raw bytes (msgpack bin).
    Bin(Bytes),
    /// A list (Python lists and tuples).
    Array(Vec<Value>),
    /// A map with keys of any type, in order.
    Map(Vec<(Value, Value)>),
    /// A msgpack extension: one of LangGraph's encoded Python objects, or an
    /// unknown code kept verbatim.
    Ext(Ext),
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
#[derive(Debug, Clone, PartialEq)]
pub struct Ext {
    pub(crate) code: i8,
    pub(crate) payload: ExtPayload,
}

/// The payload of an [`Ext`].
#[derive(Debug, Clone, PartialEq)]
pub enum ExtPayload {
    /// The payload decoded as one msgpack value.
    Decoded(Box<Value>),
    /// The payload bytes, kept verbatim.
    Raw(Bytes),
}

impl Value {
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
        Value::Map(entries.into_iter().map(|(k, v)| (Value::Str(k.into()), v)).collect())
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
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
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
        Value::Ext(e)
    }
}
