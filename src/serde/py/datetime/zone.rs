//! `datetime.timezone` and `zoneinfo.ZoneInfo`.

use super::{check_offset, TimeDelta, MICROS_PER_DAY, MICROS_PER_SECOND};
use crate::error::{Error, Result};
use crate::serde::py::{object, read_arg, str_value, via_value, CONSTRUCTOR_POS_ARGS, CONSTRUCTOR_SINGLE_ARG};
use crate::serde::Value;

/// Python's `datetime.timezone` (a fixed offset, optionally named): ext 1
/// `["datetime", "timezone", [offset]]` or `[offset, name]`, the offset a
/// [`TimeDelta`] extension.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Timezone {
    /// The offset east of UTC, strictly within one day.
    pub offset: TimeDelta,
    /// The name given to `timezone(offset, name)`.
    pub name: Option<String>,
}

impl Timezone {
    /// `datetime.timezone.utc`.
    pub fn utc() -> Self {
        Timezone {
            offset: TimeDelta::default(),
            name: None,
        }
    }

    /// A fixed offset in seconds east of UTC.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the offset is a day or more.
    pub fn from_offset_seconds(seconds: i32) -> Result<Self> {
        check_offset(seconds)?;
        Ok(Timezone {
            offset: TimeDelta::from_seconds(seconds.into())?,
            name: None,
        })
    }

    /// The same offset with a name.
    #[must_use]
    pub fn with_name(self, name: impl Into<String>) -> Self {
        Timezone {
            name: Some(name.into()),
            ..self
        }
    }

    /// The offset in whole seconds, if it has no fraction.
    pub fn offset_seconds(&self) -> Option<i32> {
        let us = self.offset.total_microseconds();
        (us % i128::from(MICROS_PER_SECOND) == 0).then(|| (us / i128::from(MICROS_PER_SECOND)) as i32)
    }

    /// The extension Python writes for this time zone.
    pub fn to_value(&self) -> Value {
        let mut args = vec![self.offset.to_value()];
        if let Some(name) = &self.name {
            args.push(str_value(name));
        }
        object(CONSTRUCTOR_POS_ARGS, "datetime", "timezone", Value::Array(args.into()))
    }

    /// Reads a `datetime.timezone` extension.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one, or its offset is a day or more.
    pub fn from_value(v: &Value) -> Result<Self> {
        let (offset, name) = read_arg(v, CONSTRUCTOR_POS_ARGS, "datetime", "timezone", |arg| {
            match arg.as_array()? {
                [offset] => Some((offset.clone(), None)),
                [offset, Value::Str(name)] => Some((offset.clone(), Some(name.as_str().to_owned()))),
                _ => None,
            }
        })?;
        let offset = TimeDelta::from_value(&offset)?;
        if offset.total_microseconds().abs() >= MICROS_PER_DAY {
            return Err(Error::serde("datetime.timezone offset is not strictly within one day"));
        }
        Ok(Timezone { offset, name })
    }
}

via_value!(Timezone);

/// Python's `zoneinfo.ZoneInfo`: ext 0 `["zoneinfo", "ZoneInfo", key]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZoneInfo {
    /// The IANA key, e.g. `"Europe/Paris"`.
    pub key: String,
}

impl ZoneInfo {
    /// The zone with IANA key `key`.
    pub fn new(key: impl Into<String>) -> Self {
        ZoneInfo { key: key.into() }
    }

    /// The extension Python writes for this zone.
    pub fn to_value(&self) -> Value {
        object(CONSTRUCTOR_SINGLE_ARG, "zoneinfo", "ZoneInfo", str_value(&self.key))
    }

    /// Reads a `zoneinfo.ZoneInfo` extension.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one.
    pub fn from_value(v: &Value) -> Result<Self> {
        read_arg(v, CONSTRUCTOR_SINGLE_ARG, "zoneinfo", "ZoneInfo", |arg| {
            Some(ZoneInfo::new(arg.as_str()?))
        })
    }
}

via_value!(ZoneInfo);
