//! Python types as LangGraph's serializer writes them, built from and read
//! into plain Rust data.
//!
//! Every type here converts to the exact [`Value`] (and so the exact msgpack
//! bytes) Python's `JsonPlusSerializer` produces for the corresponding Python
//! object (spec §4.5), so Python reads back a real `datetime`, `UUID`, `set`,
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
use std::fmt;
use std::str::FromStr;

use ::serde::de::DeserializeOwned;
use ::serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::msgpack_codec::decode;
use super::typed::{ext_from_pair, from_value_ref as typed_from_value, to_value as typed_to_value};
use super::value::{Ext, ExtPayload, Value};
use crate::error::{Error, Result};

mod datetime;
mod langgraph;
mod messages;
mod object;

pub use datetime::{Date, DateTime, Time, TimeDelta, Timezone, TzInfo, ZoneInfo};
pub use langgraph::{Command, Interrupt, Send};
pub use messages::{Message, MessageKind};
pub use object::{Object, ObjectKind};

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
        } if *c == code => decode(raw).ok().map(Cow::Owned),
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

// ---------------------------------------------------------------------------
// Scalars: UUID, Decimal, ZoneInfo (in datetime), Enum
// ---------------------------------------------------------------------------

/// Python's `uuid.UUID`: ext 0 `["uuid", "UUID", hex]` with the 32 hex digits
/// and no dashes.
///
/// ```
/// use checkpointer::serde::{msgpack, py};
/// let v = py::Uuid(uuid::Uuid::nil()).to_value();
/// assert_eq!(msgpack::encode(&v).unwrap()[..4], [0xc7, 0x2d, 0x00, 0x93]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub uuid::Uuid);

impl Uuid {
    /// The extension Python writes for this UUID.
    pub fn to_value(&self) -> Value {
        let mut buf = [0u8; uuid::fmt::Simple::LENGTH];
        let hex = self.0.simple().encode_lower(&mut buf);
        object(CONSTRUCTOR_SINGLE_ARG, "uuid", "UUID", str_value(hex))
    }

    /// Reads a `uuid.UUID` extension.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one, or its hex is not a UUID.
    pub fn from_value(v: &Value) -> Result<Self> {
        read_arg(v, CONSTRUCTOR_SINGLE_ARG, "uuid", "UUID", |arg| {
            uuid::Uuid::parse_str(arg.as_str()?).ok().map(Uuid)
        })
    }
}

via_value!(Uuid);

impl From<uuid::Uuid> for Uuid {
    fn from(u: uuid::Uuid) -> Self {
        Uuid(u)
    }
}

impl From<Uuid> for uuid::Uuid {
    fn from(u: Uuid) -> Self {
        u.0
    }
}

/// Python's `decimal.Decimal`: ext 0 `["decimal", "Decimal", str(d)]`.
///
/// Holds the decimal's text (`"1.10"`, `"-1E+3"`, `"NaN"`); no arithmetic.
///
/// ```
/// use checkpointer::serde::py::Decimal;
/// let d: Decimal = "1.10".parse().unwrap();
/// assert_eq!(d.as_str(), "1.10");
/// assert!("1.1.0".parse::<Decimal>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Decimal(String);

impl Decimal {
    /// A decimal from its text, in the syntax Python's `Decimal(str)` accepts
    /// (without surrounding spaces or underscores): an optional sign, digits
    /// with an optional point, an optional exponent; or `Infinity`, `Inf`,
    /// `NaN`, `sNaN` in any case.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for anything else.
    pub fn new(text: impl Into<String>) -> Result<Self> {
        let text = text.into();
        if is_decimal(&text) {
            Ok(Decimal(text))
        } else {
            Err(Error::invalid(format!("{text:?} is not a decimal number")))
        }
    }

    /// The decimal's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The extension Python writes for this decimal.
    pub fn to_value(&self) -> Value {
        object(CONSTRUCTOR_SINGLE_ARG, "decimal", "Decimal", str_value(&self.0))
    }

    /// Reads a `decimal.Decimal` extension.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one.
    pub fn from_value(v: &Value) -> Result<Self> {
        read_arg(v, CONSTRUCTOR_SINGLE_ARG, "decimal", "Decimal", |arg| {
            let s = arg.as_str()?;
            is_decimal(s).then(|| Decimal(s.to_owned()))
        })
    }
}

via_value!(Decimal);

impl FromStr for Decimal {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Decimal::new(s)
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<i64> for Decimal {
    fn from(i: i64) -> Self {
        Decimal(i.to_string())
    }
}

fn is_decimal(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity") {
        return true;
    }
    for nan in ["nan", "snan"] {
        if let Some(payload) = lower.strip_prefix(nan) {
            return payload.bytes().all(|b| b.is_ascii_digit());
        }
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(int) && digits(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// A member of a Python `enum.Enum` subclass (including `StrEnum`,
/// `IntEnum`): ext 0 `[module, class, value]`.
///
/// Python rebuilds it as `module.class(value)`. The reader accepts any
/// single-argument constructor (ext 0); check `module` and `class`.
#[derive(Debug, Clone, PartialEq)]
pub struct Enum {
    /// The enum class's module, e.g. `"myapp.models"`.
    pub module: String,
    /// The enum class's name.
    pub class: String,
    /// The member's value.
    pub value: Value,
}

impl Enum {
    /// A member of `module.class` with `value`.
    pub fn new(module: impl Into<String>, class: impl Into<String>, value: impl Into<Value>) -> Self {
        Enum {
            module: module.into(),
            class: class.into(),
            value: value.into(),
        }
    }

    /// The extension Python writes for this member.
    pub fn to_value(&self) -> Value {
        object(CONSTRUCTOR_SINGLE_ARG, &self.module, &self.class, self.value.clone())
    }

    /// Reads a single-argument constructor extension (ext 0).
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one.
    pub fn from_value(v: &Value) -> Result<Self> {
        read_any_class(v, CONSTRUCTOR_SINGLE_ARG, "a Python enum member", |p| {
            p.method.is_none().then(|| Enum::new(p.module, p.class, p.arg.clone()))
        })
    }
}

via_value!(Enum);

// ---------------------------------------------------------------------------
// Collections: set, frozenset, deque
// ---------------------------------------------------------------------------

macro_rules! collection {
    ($(#[$doc:meta])* $name:ident, $module:literal, $class:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
        pub struct $name<T>(pub Vec<T>);

        impl<T: Serialize> $name<T> {
            #[doc = concat!("The extension Python writes for this `", $class, "` (items in order).")]
            ///
            /// # Errors
            /// [`Error::Serde`] when an item cannot be converted (see
            /// [`to_value`](crate::serde::to_value)).
            pub fn to_value(&self) -> Result<Value> {
                let items = self.0.iter().map(typed_to_value).collect::<Result<Vec<_>>>()?;
                Ok(object(CONSTRUCTOR_SINGLE_ARG, $module, $class, Value::Array(items.into())))
            }
        }

        impl<T: DeserializeOwned> $name<T> {
            #[doc = concat!("Reads a `", $module, ".", $class, "` extension.")]
            ///
            /// # Errors
            #[doc = concat!("[`Error::Serde`] when `v` is not a `", $class, "`, or an item is not a `T`.")]
            pub fn from_value(v: &Value) -> Result<Self> {
                let items = read_arg(v, CONSTRUCTOR_SINGLE_ARG, $module, $class, |arg| arg.as_array().map(<[Value]>::to_vec))?;
                items.iter().map(typed_from_value).collect::<Result<Vec<T>>>().map($name)
            }
        }

        impl<T> FromIterator<T> for $name<T> {
            fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
                $name(iter.into_iter().collect())
            }
        }

        impl<T> IntoIterator for $name<T> {
            type Item = T;
            type IntoIter = std::vec::IntoIter<T>;

            fn into_iter(self) -> Self::IntoIter {
                self.0.into_iter()
            }
        }

        impl<T: Serialize> Serialize for $name<T> {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                self.to_value().map_err(::serde::ser::Error::custom)?.serialize(s)
            }
        }

        impl<'de, T: DeserializeOwned> Deserialize<'de> for $name<T> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let v = foreign(Value::deserialize(d)?);
                Self::from_value(&v).map_err(::serde::de::Error::custom)
            }
        }

        impl<T: Serialize> TryFrom<&$name<T>> for Value {
            type Error = Error;

            fn try_from(x: &$name<T>) -> Result<Value> {
                x.to_value()
            }
        }

        impl<T: DeserializeOwned> TryFrom<&Value> for $name<T> {
            type Error = Error;

            fn try_from(v: &Value) -> Result<Self> {
                Self::from_value(v)
            }
        }
    };
}

collection!(
    /// Python's `set`: ext 0 `["builtins", "set", [items…]]`.
    ///
    /// Python writes a set's items in its iteration order, which is not
    /// deterministic; this keeps them in the order given and read.
    Set,
    "builtins",
    "set"
);

collection!(
    /// Python's `frozenset`: ext 0 `["builtins", "frozenset", [items…]]`.
    FrozenSet,
    "builtins",
    "frozenset"
);

collection!(
    /// Python's `collections.deque`: ext 0 `["collections", "deque", [items…]]`
    /// (Python does not record `maxlen`).
    Deque,
    "collections",
    "deque"
);
