//! Python's `datetime` module types and `zoneinfo.ZoneInfo`.

#[cfg(feature = "chrono")]
mod chrono_conversions;
mod date;
mod time;
mod timedelta;
mod zone;

use std::fmt;

pub use date::{Date, DateTime};
pub use time::{Time, TzInfo};
pub use timedelta::TimeDelta;
pub use zone::{Timezone, ZoneInfo};

use crate::error::{Error, Result};
use crate::serde::py::{object, CONSTRUCTOR_POS_ARGS};
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

/// The extension Python writes for a `datetime` class built from three
/// integers: `date(year, month, day)`, `timedelta(days, seconds, microseconds)`.
fn int_args(class: &str, args: [i32; 3]) -> Value {
    object(CONSTRUCTOR_POS_ARGS, "datetime", class, Value::from(args.to_vec()))
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
