//! `datetime.time` and its `tzinfo`.

use super::{check_time, int_in, Timezone, ZoneInfo};
use crate::error::{Error, Result};
use crate::serde::py::{as_serde, object, read_arg, str_map, via_value, CONSTRUCTOR_KW_ARGS, CONSTRUCTOR_SINGLE_ARG};
use crate::serde::Value;

/// The `tzinfo` of a [`Time`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TzInfo {
    /// A fixed offset (`datetime.timezone`).
    Timezone(Timezone),
    /// A zone of the IANA database (`zoneinfo.ZoneInfo`).
    ZoneInfo(ZoneInfo),
}

impl TzInfo {
    fn to_value(&self) -> Value {
        match self {
            TzInfo::Timezone(tz) => tz.to_value(),
            TzInfo::ZoneInfo(zi) => zi.to_value(),
        }
    }

    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Ext(e) if e.code == CONSTRUCTOR_SINGLE_ARG => ZoneInfo::from_value(v).map(TzInfo::ZoneInfo),
            _ => Timezone::from_value(v).map(TzInfo::Timezone),
        }
    }
}

/// Python's `datetime.time`: ext 2 `["datetime", "time", {hour, minute,
/// second, microsecond, tzinfo, fold}]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Time {
    /// 0..=23.
    pub hour: u8,
    /// 0..=59.
    pub minute: u8,
    /// 0..=59.
    pub second: u8,
    /// 0..=999_999.
    pub microsecond: u32,
    /// The time zone, `None` for a naive time.
    pub tzinfo: Option<TzInfo>,
    /// Python's `fold` (which of two repeated wall-clock times is meant).
    pub fold: bool,
}

impl Time {
    /// A naive time.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a part is out of range.
    pub fn new(hour: u8, minute: u8, second: u8, microsecond: u32) -> Result<Self> {
        check_time(hour, minute, second, microsecond)?;
        Ok(Time {
            hour,
            minute,
            second,
            microsecond,
            tzinfo: None,
            fold: false,
        })
    }

    /// The same time in a time zone.
    #[must_use]
    pub fn with_tzinfo(self, tzinfo: TzInfo) -> Self {
        Time {
            tzinfo: Some(tzinfo),
            ..self
        }
    }

    /// The extension Python writes for this time.
    pub fn to_value(&self) -> Value {
        object(
            CONSTRUCTOR_KW_ARGS,
            "datetime",
            "time",
            str_map([
                ("hour", Value::Int(self.hour.into())),
                ("minute", Value::Int(self.minute.into())),
                ("second", Value::Int(self.second.into())),
                ("microsecond", Value::Int(self.microsecond.into())),
                ("tzinfo", self.tzinfo.as_ref().map_or(Value::Nil, TzInfo::to_value)),
                ("fold", Value::Int(self.fold.into())),
            ]),
        )
    }

    /// Reads a `datetime.time` extension; as in Python, missing arguments
    /// take their defaults (zero, no time zone).
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one, has unknown arguments or values
    /// out of range.
    pub fn from_value(v: &Value) -> Result<Self> {
        let kwargs = read_arg(v, CONSTRUCTOR_KW_ARGS, "datetime", "time", |arg| {
            arg.as_map().map(<[_]>::to_vec)
        })?;
        let mut t = Time::default();
        for (k, val) in &kwargs {
            let bad = || Error::serde(format!("datetime.time argument {k:?} has an unexpected value"));
            match k.as_str() {
                Some("hour") => t.hour = int_in(val).ok_or_else(bad)?,
                Some("minute") => t.minute = int_in(val).ok_or_else(bad)?,
                Some("second") => t.second = int_in(val).ok_or_else(bad)?,
                Some("microsecond") => t.microsecond = int_in(val).ok_or_else(bad)?,
                Some("tzinfo") if val.is_nil() => t.tzinfo = None,
                Some("tzinfo") => t.tzinfo = Some(TzInfo::from_value(val)?),
                Some("fold") => {
                    t.fold = match val.as_i64() {
                        Some(0) => false,
                        Some(1) => true,
                        _ => return Err(bad()),
                    }
                }
                // The key's text only: a key that is not a string could nest
                // without bound.
                _ => {
                    return Err(Error::serde(match k.as_str() {
                        Some(name) => format!("datetime.time has no argument {name:?}"),
                        None => "datetime.time has an argument name that is not a string".to_owned(),
                    }))
                }
            }
        }
        check_time(t.hour, t.minute, t.second, t.microsecond).map_err(as_serde)?;
        Ok(t)
    }
}

via_value!(Time);
