//! Python scalars as single-argument constructors (ext 0): `uuid.UUID`,
//! `decimal.Decimal` and enum members.

use std::fmt;
use std::str::FromStr;

use super::{object, read_any_class, read_arg, str_value, via_value, CONSTRUCTOR_SINGLE_ARG};
use crate::error::{Error, Result};
use crate::serde::Value;

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
