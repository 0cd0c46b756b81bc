//! `datetime.datetime` (with its ISO 8601 form) and `datetime.date`.

use std::fmt;

use super::{check_date, check_offset, check_time, int_args, int_in, write_offset};
use crate::error::{Error, Result};
use crate::serde::py::{
    as_serde, ext, parts, payload_of, read_arg, str_value, via_value, CONSTRUCTOR_POS_ARGS, METHOD_SINGLE_ARG,
};
use crate::serde::Value;

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
                crate::serde::py::describe(v)
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
        int_args("date", [self.year, self.month.into(), self.day.into()])
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
