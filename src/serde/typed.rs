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

mod de;
mod error;
mod level;
mod ser;
mod value_impls;

use ::serde::de::DeserializeOwned;
use ::serde::ser::Serialize;
use ::serde::Deserialize;

use self::de::{De, Node};
use self::error::BridgeError;
use self::ser::ValueSerializer;
pub(crate) use self::value_impls::ext_from_pair;
use super::value::Value;
use crate::error::Result;

/// Newtype-struct name under which [`Value::Ext`] serializes itself; the
/// bridge's serializer recognises it and keeps the extension whole.
pub(super) const EXT_TOKEN: &str = "$checkpointer::Ext";
/// Newtype-struct name under which [`Value::F32`] serializes itself, so the
/// bridge keeps it a 32-bit float (plain `f32` fields become Python floats).
pub(super) const F32_TOKEN: &str = "$checkpointer::F32";

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
/// [`Error::Serde`](crate::Error::Serde) when the value's `Serialize` implementation fails, or for
/// an `i128`/`u128` outside `i64::MIN..=u64::MAX` (msgpack and Python's
/// serializer stop there), and for a value that nests deeper than
/// [`MAX_DEPTH`](super::msgpack::MAX_DEPTH) arrays, maps and extension values
/// (what the decoder would refuse), or through more than 512 nested
/// `Serialize` calls counting `Option`s and newtypes: the walk stops there
/// instead of recursing on. The reason names the failing field, e.g.
/// `` at `items[2].when`: ... ``.
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value> {
    value.serialize(ValueSerializer::top()).map_err(BridgeError::into_error)
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
/// [`Error::Serde`](crate::Error::Serde) when the value does not have the shape `T` expects, or
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
