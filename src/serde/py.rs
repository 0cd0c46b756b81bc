//! Python types as LangGraph's serializer writes them, built from and read
//! into plain Rust data.
//!
//! Every type here converts to the exact [`Value`] (and so the exact msgpack
//! bytes) Python's `JsonPlusSerializer` produces for the corresponding Python
//! object (the extension codes and payloads: see `docs/design.md`, *Extension
//! values*), so Python reads back a real `datetime`, `UUID`, `set`,
//! `HumanMessage`, `Send`… And each reads such a value back, refusing
//! anything else with [`Error::Serde`].
//!
//! | Rust | Python | extension |
//! |---|---|---|
//! | [`DateTime`] | `datetime.datetime` (naive or with a fixed UTC offset) | 3, `fromisoformat` |
//! | [`Date`] | `datetime.date` | 1 |
//! | [`Time`] | `datetime.time` | 2 |
//! | [`TimeDelta`] | `datetime.timedelta` | 1 |
//! | [`Timezone`] | `datetime.timezone` | 1 |
//! | [`ZoneInfo`] | `zoneinfo.ZoneInfo` | 0 |
//! | [`Uuid`] | `uuid.UUID` | 0 |
//! | [`Decimal`] | `decimal.Decimal` | 0 |
//! | [`Set`], [`FrozenSet`], [`Deque`] | `set`, `frozenset`, `collections.deque` | 0 |
//! | [`Enum`] | a member of an `enum.Enum` subclass | 0 |
//! | [`Object`] | a dataclass instance or a namedtuple; a pydantic v2 model ([`ObjectKind`]) | 2; 5 |
//! | [`Message`] | LangChain's `HumanMessage`, `AIMessage`, `SystemMessage`, `ToolMessage` | 5 |
//! | [`Send`], [`Interrupt`], [`Command`] | `langgraph.types.Send`, `Interrupt`, `Command` | 1, 2, 2 |
//!
//! Each type has `to_value` and `from_value`, `From<T> for Value` and
//! `TryFrom<&Value>`, and implements `Serialize`/`Deserialize` through the
//! extension, so it can be a field of a user's `#[derive(Serialize,
//! Deserialize)]` struct stored with [`to_value`](super::to_value):
//!
//! ```
//! use checkpointer::serde::{from_value, msgpack, py, to_value};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, PartialEq, Debug)]
//! struct Event {
//!     id: py::Uuid,
//!     at: py::DateTime,
//!     tags: py::Set<String>,
//! }
//!
//! let event = Event {
//!     id: py::Uuid(uuid::Uuid::nil()),
//!     at: py::DateTime::parse_isoformat("2024-01-02T03:04:05+00:00")?,
//!     tags: py::Set(vec!["a".into()]),
//! };
//! let value = to_value(&event)?;
//! // Python reads {"id": UUID(...), "at": datetime(...), "tags": {"a"}}.
//! let bytes = msgpack::encode(&value)?;
//! assert_eq!(from_value::<Event>(msgpack::decode(&bytes)?)?, event);
//! # Ok::<(), checkpointer::Error>(())
//! ```
//!
//! With the `chrono` feature, [`DateTime`], [`Date`], [`Time`] and
//! [`TimeDelta`] convert to and from chrono's types.

use std::borrow::Cow;

use super::msgpack_codec::decode_bytes;
use super::typed::ext_from_pair;
use super::value::{Ext, ExtPayload, Value};
use crate::error::{Error, Result};

mod collections;
mod datetime;
mod langgraph;
mod messages;
mod object;
mod scalars;

pub use collections::{Deque, FrozenSet, Set};
pub use datetime::{Date, DateTime, Time, TimeDelta, Timezone, TzInfo, ZoneInfo};
pub use langgraph::{Command, Interrupt, Send};
pub use messages::{Message, MessageKind};
pub use object::{Object, ObjectKind};
pub use scalars::{Decimal, Enum, Uuid};

// ---------------------------------------------------------------------------
// Building and reading `[module, class, arg(, method)]` extensions
// ---------------------------------------------------------------------------

const CONSTRUCTOR_SINGLE_ARG: i8 = 0;
const CONSTRUCTOR_POS_ARGS: i8 = 1;
const CONSTRUCTOR_KW_ARGS: i8 = 2;
const METHOD_SINGLE_ARG: i8 = 3;
const PYDANTIC_V2: i8 = 5;

fn ext(code: i8, payload: Value) -> Value {
    Value::Ext(Box::new(Ext {
        code,
        payload: ExtPayload::Decoded(Box::new(payload)),
    }))
}

fn str_value(s: &str) -> Value {
    Value::Str(s.into())
}

/// `ext code [module, class, arg]`.
fn object(code: i8, module: &str, class: &str, arg: Value) -> Value {
    ext(
        code,
        Value::Array(vec![str_value(module), str_value(class), arg].into()),
    )
}

/// A map with string keys, in order.
fn str_map<'a>(entries: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (str_value(k), v)).collect())
}

/// The parts of a `[module, class, arg(, method)]` extension.
struct Parts<'a> {
    module: &'a str,
    class: &'a str,
    arg: &'a Value,
    method: Option<&'a Value>,
}

/// The payload of `v` if it is an extension with `code`, decoding a raw
/// payload if it was kept as bytes.
fn payload_of(v: &Value, code: i8) -> Option<Cow<'_, Value>> {
    let Value::Ext(ext) = v else {
        return None;
    };
    match &**ext {
        Ext {
            code: c,
            payload: ExtPayload::Decoded(inner),
        } if *c == code => Some(Cow::Borrowed(&**inner)),
        Ext {
            code: c,
            payload: ExtPayload::Raw(raw),
        } if *c == code => decode_bytes(raw).ok().map(Cow::Owned),
        _ => None,
    }
}

fn parts(payload: &Value) -> Option<Parts<'_>> {
    match payload.as_array()? {
        [module, class, arg] => Some(Parts {
            module: module.as_str()?,
            class: class.as_str()?,
            arg,
            method: None,
        }),
        [module, class, arg, method] => Some(Parts {
            module: module.as_str()?,
            class: class.as_str()?,
            arg,
            method: Some(method),
        }),
        _ => None,
    }
}

/// Reads the argument of `module.class` encoded with extension `code`, or
/// explains what `v` is instead.
fn read_arg<T>(v: &Value, code: i8, module: &str, class: &str, read: impl FnOnce(&Value) -> Option<T>) -> Result<T> {
    let wrong = || {
        Error::serde(format!(
            "expected Python {module}.{class} (ext {code}), found {}",
            describe(v)
        ))
    };
    let payload = payload_of(v, code).ok_or_else(wrong)?;
    let p = parts(&payload).ok_or_else(wrong)?;
    if p.module != module || p.class != class {
        return Err(wrong());
    }
    read(p.arg).ok_or_else(|| {
        Error::serde(format!(
            "Python {module}.{class} (ext {code}) with an unexpected argument: {}",
            describe(p.arg)
        ))
    })
}

/// Reads `[module, class, arg]` of any class under extension `code`.
fn read_any_class<T>(v: &Value, code: i8, what: &str, read: impl FnOnce(Parts<'_>) -> Option<T>) -> Result<T> {
    let wrong = || Error::serde(format!("expected {what} (ext {code}), found {}", describe(v)));
    let payload = payload_of(v, code).ok_or_else(wrong)?;
    let p = parts(&payload).ok_or_else(wrong)?;
    read(p).ok_or_else(wrong)
}

/// A constructor's [`Error::InvalidInput`] as the [`Error::Serde`] a reader
/// reports.
fn as_serde(e: Error) -> Error {
    match e {
        Error::InvalidInput { reason } => Error::Serde { reason },
        other => other,
    }
}

/// A short description of a value for error messages.
fn describe(v: &Value) -> String {
    match v {
        Value::Nil => "None".into(),
        Value::Bool(_) => "a bool".into(),
        Value::Int(_) | Value::UInt(_) => "an integer".into(),
        Value::F32(_) | Value::Float(_) => "a float".into(),
        Value::Str(_) => "a string".into(),
        Value::Bin(_) => "bytes".into(),
        Value::Array(_) => "an array".into(),
        Value::Map(_) => "a map".into(),
        Value::Ext(e) => match payload_of(v, e.code).as_deref().and_then(parts) {
            Some(p) => format!("ext {} {}.{}", e.code, p.module, p.class),
            None => format!("ext {}", e.code),
        },
    }
}

/// `(name, value)` pairs of a map with string keys.
fn str_entries(v: &Value) -> Option<Vec<(String, Value)>> {
    v.as_map()?
        .iter()
        .map(|(k, v)| Some((k.as_str()?.to_owned(), v.clone())))
        .collect()
}

/// Implements the conversions every type of this module has on top of its
/// inherent `to_value(&self) -> Value` and `from_value(&Value) -> Result<Self>`.
macro_rules! via_value {
    ($t:ty) => {
        impl From<$t> for Value {
            fn from(x: $t) -> Value {
                x.to_value()
            }
        }

        impl From<&$t> for Value {
            fn from(x: &$t) -> Value {
                x.to_value()
            }
        }

        impl TryFrom<&Value> for $t {
            type Error = Error;

            fn try_from(v: &Value) -> Result<Self> {
                <$t>::from_value(v)
            }
        }

        impl ::serde::Serialize for $t {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                self.to_value().serialize(s)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $t {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let v = $crate::serde::py::foreign(Value::deserialize(d)?);
                <$t>::from_value(&v).map_err(::serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use via_value;

/// An extension that went through another serde format comes back as the pair
/// `[code, payload bytes]`; turn it into the extension again.
fn foreign(v: Value) -> Value {
    ext_from_pair(v)
}
