//! The dynamic value stored in channels, writes and metadata.

mod deep;
mod ext;
mod shared_vec;
pub(crate) mod size_memo;

pub use ext::{Ext, ExtKind, ExtPayload, NumpyOrder, NumpyView};
pub use shared_vec::SharedVec;

use bytes::Bytes;

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
/// ```
/// use checkpointer::serde::{msgpack, Value};
/// let v = Value::map([("messages", Value::from(vec!["hi"])), ("turns", Value::from(2))]);
/// assert_eq!(v.as_map().unwrap().len(), 2);
/// let bytes = msgpack::encode(&v)?;
/// assert_eq!(msgpack::decode(&bytes)?, v); // the bytes Python writes for {"messages": ["hi"], "turns": 2}
/// assert_eq!(Value::from(u64::MAX), Value::UInt(u64::MAX));
/// # Ok::<(), checkpointer::Error>(())
/// ```
///
/// # Nesting
///
/// Every entry point of the crate that walks a value bounds its walk at
/// [`msgpack::MAX_DEPTH`](crate::serde::msgpack::MAX_DEPTH) levels of arrays,
/// maps and extension values and refuses deeper values with
/// [`Error::Serde`](crate::Error::Serde), and no decoder produces a deeper value.
/// A value a program builds deeper than that, a million levels say, is still
/// safe to hold on any thread's stack: `Clone` never recurses (lists and maps
/// are shared, chains of extensions are copied in a loop); dropping and `==`
/// recurse a few dozen levels, then go on with a heap stack; `Debug` prints
/// `MAX_DEPTH` levels and writes `…` for anything deeper.
#[derive(Clone, Default)]
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
pub(super) fn string_value(s: impl Into<String>) -> Value {
    Value::Str(Str::from(s.into()))
}
