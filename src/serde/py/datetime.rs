//! Python's `datetime` module types and `zoneinfo.ZoneInfo`.

use std::fmt;

use super::{
    as_serde, ext, object, parts, payload_of, read_arg, str_map, str_value, via_value, CONSTRUCTOR_KW_ARGS,
    CONSTRUCTOR_POS_ARGS, CONSTRUCTOR_SINGLE_ARG, METHOD_SINGLE_ARG,
};
use crate::error::{Error, Result};
use crate::serde::Value;

const MAX_DAYS: i64 = 999_999_999;
const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i128 = 86_400 * MICROS_PER_SECOND as i128;
/// Python refuses UTC offsets of a day or more.
const MAX_OFFSET_SECONDS: i32 = 86_399;

fn is_leap(year: i32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

fn check_date(year: i32, month: u8, day: u8) -> Result<()> {
    if !(1..=9999).contains(&year) {
        return Err(Error::invalid(format!(
            "year {year} is outside Python's range 1..=9999"
        )));
    }
    if !(1..=12).contains(&month) {
        return Err(Error::invalid(format!("month {month} is not in 1..=12")));
    }
    if day == 0 || day > days_in_month(year, month) {
        return Err(Error::invalid(format!("day {day} is not in month {year}-{month:02}")));
    }
    Ok(())
}

fn check_time(hour: u8, minute: u8, second: u8, microsecond: u32) -> Result<()> {
    if hour > 23 || minute > 59 || second > 59 || microsecond > 999_999 {
        return Err(Error::invalid(format!(
            "time {hour}:{minute}:{second}.{microsecond} is out of range (Python has no leap seconds)"
        )));
    }
    Ok(())
}

fn check_offset(seconds: i32) -> Result<()> {
    if seconds.abs() > MAX_OFFSET_SECONDS {
        return Err(Error::invalid(format!(
            "UTC offset of {seconds} s is not strictly within one day"
        )));
    }
    Ok(())
}

fn int_in<T: TryFrom<i64>>(v: &Value) -> Option<T> {
    T::try_from(v.as_i64()?).ok()
}

/// `+HH:MM` with `:SS` when the seconds are not zero, as Python formats a
/// UTC offset.
fn write_offset(out: &mut String, seconds: i32) {
    use fmt::Write;
    let sign = if seconds < 0 { '-' } else { '+' };
    let abs = seconds.unsigned_abs();
    let _ = write!(out, "{sign}{:02}:{:02}", abs / 3600, abs % 3600 / 60);
    if abs % 60 != 0 {
        let _ = write!(out, ":{:02}", abs % 60);
    }
}

// ---------------------------------------------------------------------------
// datetime.datetime
// ---------------------------------------------------------------------------

/// Python's `datetime.datetime`, naive or with a fixed UTC offset: ext 3
/// `["datetime", "datetime", isoformat(), "fromisoformat"]`.
///
/// A Python datetime whose `tzinfo` is a `ZoneInfo` is written by Python with
/// the offset in force at that moment, so it reads back with that fixed
/// offset. Python allows offsets with sub-second parts; this type does not
/// (such a value is refused when read).
///
/// The fields are public; [`to_value`](Self::to_value) writes them as they
/// are, so build values with [`Date::and_hms_micro`], [`parse_isoformat`]
/// or the conversions (which check them), or call [`validate`](Self::validate).
///
/// ```
/// use checkpointer::serde::py::{Date, DateTime};
/// let dt = Date::new(2024, 1, 2)?.and_hms_micro(3, 4, 5, 678)?.with_offset(0)?;
/// assert_eq!(dt.isoformat(), "2024-01-02T03:04:05.000678+00:00");
/// assert_eq!(DateTime::parse_isoformat("2024-01-02T03:04:05.000678+00:00")?, dt);
/// # Ok::<(), checkpointer::Error>(())
/// ```
///
/// [`parse_isoformat`]: Self::parse_isoformat
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DateTime {
    /// 1..=9999.
    pub year: i32,
    /// 1..=12.
    pub month: u8,
    /// 1..=31, valid for the month.
    pub day: u8,
    /// 0..=23.
    pub hour: u8,
    /// 0..=59.
    pub minute: u8,
    /// 0..=59.
    pub second: u8,
    /// 0..=999_999.
    pub microsecond: u32,
    /// Seconds east of UTC, strictly within one day; `None` for a naive
    /// datetime.
    pub offset_seconds: Option<i32>,
}

impl DateTime {
    /// The same wall-clock time with a fixed UTC offset in seconds (east
    /// positive).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the offset is a day or more.
    pub fn with_offset(self, offset_seconds: i32) -> Result<Self> {
        check_offset(offset_seconds)?;
        Ok(DateTime {
            offset_seconds: Some(offset_seconds),
            ..self
        })
    }

    /// The same wall-clock time without an offset.
    pub fn naive(self) -> Self {
        DateTime {
            offset_seconds: None,
            ..self
        }
    }

    /// The date part.
    pub fn date(&self) -> Date {
        Date {
            year: self.year,
            month: self.month,
            day: self.day,
        }
    }

    /// Checks every field is in Python's range.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the field that is not.
    pub fn validate(&self) -> Result<()> {
        check_date(self.year, self.month, self.day)?;
        check_time(self.hour, self.minute, self.second, self.microsecond)?;
        self.offset_seconds.map_or(Ok(()), check_offset)
    }

    /// `datetime.isoformat()`: `YYYY-MM-DDTHH:MM:SS`, then `.ffffff` when the
    /// microseconds are not zero, then the offset `+HH:MM` (with `:SS` when
    /// it has seconds) for an aware datetime.
    pub fn isoformat(&self) -> String {
        let mut out = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        );
        if self.microsecond != 0 {
            out.push_str(&format!(".{:06}", self.microsecond));
        }
        if let Some(offset) = self.offset_seconds {
            write_offset(&mut out, offset);
        }
        out
    }

    /// Parses what Python's `datetime.fromisoformat` accepts: a date
    /// (`YYYY-MM-DD` or `YYYYMMDD`), optionally followed by one separator
    /// character and a time `HH[:MM[:SS[.f…]]]` (or without colons; digits
    /// past the sixth fractional one are dropped), optionally followed by
    /// `Z` or an offset `±HH[:MM[:SS]]`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for anything else, values out of range, and
    /// offsets with fractional seconds.
    pub fn parse_isoformat(s: &str) -> Result<Self> {
        parse_isoformat(s).ok_or_else(|| Error::invalid(format!("{s:?} is not an ISO 8601 datetime")))?
    }

    /// The extension Python writes for this datetime.
    pub fn to_value(&self) -> Value {
        ext(
            METHOD_SINGLE_ARG,
            Value::Array(
                (vec![
                    str_value("datetime"),
                    str_value("datetime"),
                    Value::from(self.isoformat()),
                    str_value("fromisoformat"),
                ])
                .into(),
            ),
        )
    }

    /// Reads a `datetime.datetime` extension.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one, or holds a string this type
    /// cannot represent.
    pub fn from_value(v: &Value) -> Result<Self> {
        let wrong = || {
            Error::serde(format!(
                "expected Python datetime.datetime (ext 3, fromisoformat), found {}",
                super::describe(v)
            ))
        };
        let payload = payload_of(v, METHOD_SINGLE_ARG).ok_or_else(wrong)?;
        let p = parts(&payload).ok_or_else(wrong)?;
        let iso = match (p.module, p.class, p.method.and_then(Value::as_str), p.arg.as_str()) {
            ("datetime", "datetime", Some("fromisoformat"), Some(iso)) => iso,
            _ => return Err(wrong()),
        };
        DateTime::parse_isoformat(iso).map_err(as_serde)
    }
}

via_value!(DateTime);

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.isoformat())
    }
}

/// A little cursor over ASCII digits and punctuation.
struct Cursor<'a> {
    s: &'a [u8],
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize) -> Option<u32> {
        if self.s.len() < n || !self.s[..n].iter().all(u8::is_ascii_digit) {
            return None;
        }
        let v = self.s[..n].iter().fold(0u32, |acc, b| acc * 10 + u32::from(b - b'0'));
        self.s = &self.s[n..];
        Some(v)
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.first() == Some(&c) {
            self.s = &self.s[1..];
            true
        } else {
            false
        }
    }

    fn peek_digit(&self) -> bool {
        self.s.first().is_some_and(u8::is_ascii_digit)
    }

    /// `HH[:MM[:SS[.f…]]]` or `HH[MM[SS[.f…]]]`; returns the parts and the
    /// microseconds.
    fn clock(&mut self) -> Option<(u32, u32, u32, u32)> {
        let hour = self.digits(2)?;
        let mut rest = [0u32; 2];
        let colons = self.s.first() == Some(&b':');
        for slot in &mut rest {
            if colons {
                if !self.eat(b':') {
                    break;
                }
            } else if !self.peek_digit() {
                break;
            }
            *slot = self.digits(2)?;
        }
        let mut micro = 0;
        if self.eat(b'.') || self.eat(b',') {
            let mut n = 0;
            while self.peek_digit() {
                let d = u32::from(self.s[0] - b'0');
                self.s = &self.s[1..];
                if n < 6 {
                    micro = micro * 10 + d;
                }
                n += 1;
            }
            if n == 0 {
                return None;
            }
            for _ in n..6 {
                micro *= 10;
            }
        }
        Some((hour, rest[0], rest[1], micro))
    }
}

fn parse_isoformat(s: &str) -> Option<Result<DateTime>> {
    let mut c = Cursor { s: s.as_bytes() };
    let year = c.digits(4)?;
    let dashes = c.eat(b'-');
    let month = c.digits(2)?;
    if dashes && !c.eat(b'-') {
        return None;
    }
    let day = c.digits(2)?;
    let mut dt = DateTime {
        year: year as i32,
        month: month as u8,
        day: day as u8,
        hour: 0,
        minute: 0,
        second: 0,
        microsecond: 0,
        offset_seconds: None,
    };
    if !c.s.is_empty() {
        // One separator character of any kind (Python accepts any).
        let sep_len = s[s.len() - c.s.len()..].chars().next()?.len_utf8();
        c.s = &c.s[sep_len..];
        let (h, m, sec, micro) = c.clock()?;
        dt.hour = h as u8;
        dt.minute = m as u8;
        dt.second = sec as u8;
        dt.microsecond = micro;
        if c.eat(b'Z') {
            dt.offset_seconds = Some(0);
        } else if let Some(&sign) = c.s.first().filter(|b| **b == b'+' || **b == b'-') {
            c.s = &c.s[1..];
            let (oh, om, os, omicro) = c.clock()?;
            if omicro != 0 {
                return Some(Err(Error::invalid(format!(
                    "{s:?}: UTC offsets with fractional seconds are not supported"
                ))));
            }
            if om > 59 || os > 59 {
                return None;
            }
            let secs = (oh * 3600 + om * 60 + os) as i32;
            dt.offset_seconds = Some(if sign == b'-' { -secs } else { secs });
        }
        if !c.s.is_empty() {
            return None;
        }
    }
    // The components have at most 4 digits, so the casts above are exact.
    Some(dt.validate().map(|()| dt))
}

// ---------------------------------------------------------------------------
// datetime.date
// ---------------------------------------------------------------------------

/// Python's `datetime.date`: ext 1 `["datetime", "date", [year, month, day]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Date {
    /// 1..=9999.
    pub year: i32,
    /// 1..=12.
    pub month: u8,
    /// 1..=31, valid for the month.
    pub day: u8,
}

impl Date {
    /// A date.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a date Python cannot hold.
    pub fn new(year: i32, month: u8, day: u8) -> Result<Self> {
        check_date(year, month, day)?;
        Ok(Date { year, month, day })
    }

    /// A naive datetime on this date.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the time is out of range or the date is
    /// invalid.
    pub fn and_hms_micro(self, hour: u8, minute: u8, second: u8, microsecond: u32) -> Result<DateTime> {
        check_date(self.year, self.month, self.day)?;
        check_time(hour, minute, second, microsecond)?;
        Ok(DateTime {
            year: self.year,
            month: self.month,
            day: self.day,
            hour,
            minute,
            second,
            microsecond,
            offset_seconds: None,
        })
    }

    /// The extension Python writes for this date.
    pub fn to_value(&self) -> Value {
        object(
            CONSTRUCTOR_POS_ARGS,
            "datetime",
            "date",
            Value::Array(
                (vec![
                    Value::Int(self.year.into()),
                    Value::Int(self.month.into()),
                    Value::Int(self.day.into()),
                ])
                .into(),
            ),
        )
    }

    /// Reads a `datetime.date` extension.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one, or not a valid date.
    pub fn from_value(v: &Value) -> Result<Self> {
        let (year, month, day) = read_arg(v, CONSTRUCTOR_POS_ARGS, "datetime", "date", |arg| {
            match arg.as_array()? {
                [y, m, d] => Some((int_in(y)?, int_in(m)?, int_in(d)?)),
                _ => None,
            }
        })?;
        Date::new(year, month, day).map_err(as_serde)
    }
}

via_value!(Date);

// ---------------------------------------------------------------------------
// datetime.time
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// datetime.timedelta
// ---------------------------------------------------------------------------

/// Python's `datetime.timedelta`: ext 1 `["datetime", "timedelta", [days,
/// seconds, microseconds]]`, normalised as Python does: `seconds` in
/// `0..86400`, `microseconds` in `0..1_000_000`, `days` (which carries the
/// sign) in `-999_999_999..=999_999_999`.
///
/// ```
/// use checkpointer::serde::py::TimeDelta;
/// let minus_one_second = TimeDelta::new(0, -1, 0)?;
/// assert_eq!((minus_one_second.days, minus_one_second.seconds, minus_one_second.microseconds), (-1, 86399, 0));
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TimeDelta {
    /// Whole days; negative for negative durations.
    pub days: i32,
    /// 0..86400.
    pub seconds: i32,
    /// 0..1_000_000.
    pub microseconds: i32,
}

impl TimeDelta {
    /// A duration from any days, seconds and microseconds, normalised as
    /// Python's `timedelta(days, seconds, microseconds)` does.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the total is beyond ±999 999 999 days.
    pub fn new(days: i64, seconds: i64, microseconds: i64) -> Result<Self> {
        let total = i128::from(days) * MICROS_PER_DAY
            + i128::from(seconds) * i128::from(MICROS_PER_SECOND)
            + i128::from(microseconds);
        TimeDelta::from_microseconds(total)
    }

    /// A duration of `total` microseconds.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it is beyond ±999 999 999 days.
    pub fn from_microseconds(total: i128) -> Result<Self> {
        let days = total.div_euclid(MICROS_PER_DAY);
        let rest = total.rem_euclid(MICROS_PER_DAY) as i64;
        if days.abs() > i128::from(MAX_DAYS) {
            return Err(Error::invalid(format!(
                "a duration of {total} µs is beyond Python's ±999999999 days"
            )));
        }
        Ok(TimeDelta {
            days: days as i32,
            seconds: (rest / MICROS_PER_SECOND) as i32,
            microseconds: (rest % MICROS_PER_SECOND) as i32,
        })
    }

    /// A duration of whole seconds.
    ///
    /// # Errors
    /// As [`from_microseconds`](Self::from_microseconds).
    pub fn from_seconds(seconds: i64) -> Result<Self> {
        TimeDelta::new(0, seconds, 0)
    }

    /// The whole duration in microseconds.
    pub fn total_microseconds(&self) -> i128 {
        i128::from(self.days) * MICROS_PER_DAY
            + i128::from(self.seconds) * i128::from(MICROS_PER_SECOND)
            + i128::from(self.microseconds)
    }

    /// The extension Python writes for this duration (as normalised from the
    /// fields' total).
    pub fn to_value(&self) -> Value {
        let n = TimeDelta::from_microseconds(self.total_microseconds()).unwrap_or(*self);
        object(
            CONSTRUCTOR_POS_ARGS,
            "datetime",
            "timedelta",
            Value::Array(
                (vec![
                    Value::Int(n.days.into()),
                    Value::Int(n.seconds.into()),
                    Value::Int(n.microseconds.into()),
                ])
                .into(),
            ),
        )
    }

    /// Reads a `datetime.timedelta` extension, normalising its arguments as
    /// Python's constructor does.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one, or its total is out of range.
    pub fn from_value(v: &Value) -> Result<Self> {
        let (d, s, us) = read_arg(v, CONSTRUCTOR_POS_ARGS, "datetime", "timedelta", |arg| {
            let a = arg.as_array()?;
            let get = |i: usize| a.get(i).map_or(Some(0), Value::as_i64);
            (a.len() <= 3).then_some(())?;
            Some((get(0)?, get(1)?, get(2)?))
        })?;
        TimeDelta::new(d, s, us).map_err(as_serde)
    }
}

via_value!(TimeDelta);

// ---------------------------------------------------------------------------
// datetime.timezone, zoneinfo.ZoneInfo
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// chrono
// ---------------------------------------------------------------------------

#[cfg(feature = "chrono")]
mod chrono_conversions {
    //! Sub-microsecond precision is truncated (Python has microseconds);
    //! chrono's leap seconds and years outside 1..=9999 are refused.

    use chrono::{Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Timelike, Utc};

    use super::{check_offset, Date, DateTime, Time, TimeDelta};
    use crate::error::{Error, Result};

    fn micro(nanos: u32) -> Result<u32> {
        if nanos >= 1_000_000_000 {
            return Err(Error::invalid("Python has no leap seconds"));
        }
        Ok(nanos / 1000)
    }

    impl TryFrom<NaiveDate> for Date {
        type Error = Error;

        fn try_from(d: NaiveDate) -> Result<Self> {
            Date::new(d.year(), d.month() as u8, d.day() as u8)
        }
    }

    impl TryFrom<Date> for NaiveDate {
        type Error = Error;

        fn try_from(d: Date) -> Result<Self> {
            super::check_date(d.year, d.month, d.day)?;
            NaiveDate::from_ymd_opt(d.year, d.month.into(), d.day.into())
                .ok_or_else(|| Error::invalid(format!("{d:?} is not a date")))
        }
    }

    impl TryFrom<NaiveTime> for Time {
        type Error = Error;

        fn try_from(t: NaiveTime) -> Result<Self> {
            Time::new(
                t.hour() as u8,
                t.minute() as u8,
                t.second() as u8,
                micro(t.nanosecond())?,
            )
        }
    }

    impl TryFrom<Time> for NaiveTime {
        type Error = Error;

        fn try_from(t: Time) -> Result<Self> {
            if t.tzinfo.is_some() {
                return Err(Error::invalid("a time with a tzinfo has no chrono NaiveTime"));
            }
            NaiveTime::from_hms_micro_opt(t.hour.into(), t.minute.into(), t.second.into(), t.microsecond)
                .ok_or_else(|| Error::invalid(format!("{t:?} is out of range")))
        }
    }

    impl TryFrom<NaiveDateTime> for DateTime {
        type Error = Error;

        fn try_from(dt: NaiveDateTime) -> Result<Self> {
            Date::try_from(dt.date())?.and_hms_micro(
                dt.hour() as u8,
                dt.minute() as u8,
                dt.second() as u8,
                micro(dt.nanosecond())?,
            )
        }
    }

    impl<Tz: TimeZone> TryFrom<chrono::DateTime<Tz>> for DateTime {
        type Error = Error;

        fn try_from(dt: chrono::DateTime<Tz>) -> Result<Self> {
            let offset = dt.offset().fix().local_minus_utc();
            DateTime::try_from(dt.naive_local())?.with_offset(offset)
        }
    }

    fn naive(dt: &DateTime) -> Result<NaiveDateTime> {
        dt.validate()?;
        let date = NaiveDate::try_from(dt.date())?;
        let time = NaiveTime::from_hms_micro_opt(dt.hour.into(), dt.minute.into(), dt.second.into(), dt.microsecond)
            .ok_or_else(|| Error::invalid(format!("{dt:?} is out of range")))?;
        Ok(date.and_time(time))
    }

    impl TryFrom<DateTime> for NaiveDateTime {
        type Error = Error;

        /// Only for a naive datetime: an aware one is a different instant
        /// depending on how its offset is applied.
        fn try_from(dt: DateTime) -> Result<Self> {
            if dt.offset_seconds.is_some() {
                return Err(Error::invalid(
                    "an aware datetime has no chrono NaiveDateTime; convert to DateTime<FixedOffset>",
                ));
            }
            naive(&dt)
        }
    }

    impl TryFrom<DateTime> for chrono::DateTime<FixedOffset> {
        type Error = Error;

        /// Only for an aware datetime.
        fn try_from(dt: DateTime) -> Result<Self> {
            let seconds = dt
                .offset_seconds
                .ok_or_else(|| Error::invalid("a naive datetime has no offset; convert to NaiveDateTime"))?;
            check_offset(seconds)?;
            let offset = FixedOffset::east_opt(seconds).ok_or_else(|| Error::invalid(format!("offset {seconds} s")))?;
            offset
                .from_local_datetime(&naive(&dt)?)
                .single()
                .ok_or_else(|| Error::invalid(format!("{dt} is not a single instant")))
        }
    }

    impl TryFrom<DateTime> for chrono::DateTime<Utc> {
        type Error = Error;

        /// Only for an aware datetime.
        fn try_from(dt: DateTime) -> Result<Self> {
            chrono::DateTime::<FixedOffset>::try_from(dt).map(|d| d.with_timezone(&Utc))
        }
    }

    impl TryFrom<chrono::TimeDelta> for TimeDelta {
        type Error = Error;

        fn try_from(d: chrono::TimeDelta) -> Result<Self> {
            // Both parts carry the duration's sign: truncation toward zero.
            let us = i128::from(d.num_seconds()) * 1_000_000 + i128::from(d.subsec_nanos() / 1000);
            TimeDelta::from_microseconds(us)
        }
    }

    impl From<TimeDelta> for chrono::TimeDelta {
        fn from(d: TimeDelta) -> Self {
            // ±999 999 999 days fit chrono's range (about ±292 million years).
            chrono::TimeDelta::days(d.days.into())
                + chrono::TimeDelta::seconds(d.seconds.into())
                + chrono::TimeDelta::microseconds(d.microseconds.into())
        }
    }
}
