//! Sub-microsecond precision is truncated (Python has microseconds);
//! chrono's leap seconds and years outside 1..=9999 are refused.

use std::fmt;

use chrono::{Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Timelike, Utc};

use super::{check_offset, Date, DateTime, Time, TimeDelta};
use crate::error::{Error, Result};

/// Hour, minute, second and microsecond of a chrono time of day.
fn clock(t: &impl Timelike) -> Result<(u8, u8, u8, u32)> {
    let nanos = t.nanosecond();
    if nanos >= 1_000_000_000 {
        return Err(Error::invalid("Python has no leap seconds"));
    }
    Ok((t.hour() as u8, t.minute() as u8, t.second() as u8, nanos / 1000))
}

/// The chrono time of day of `what`'s clock fields.
fn naive_time(hour: u8, minute: u8, second: u8, microsecond: u32, what: &dyn fmt::Debug) -> Result<NaiveTime> {
    NaiveTime::from_hms_micro_opt(hour.into(), minute.into(), second.into(), microsecond)
        .ok_or_else(|| Error::invalid(format!("{what:?} is out of range")))
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
        let (hour, minute, second, microsecond) = clock(&t)?;
        Time::new(hour, minute, second, microsecond)
    }
}

impl TryFrom<Time> for NaiveTime {
    type Error = Error;

    fn try_from(t: Time) -> Result<Self> {
        if t.tzinfo.is_some() {
            return Err(Error::invalid("a time with a tzinfo has no chrono NaiveTime"));
        }
        naive_time(t.hour, t.minute, t.second, t.microsecond, &t)
    }
}

impl TryFrom<NaiveDateTime> for DateTime {
    type Error = Error;

    fn try_from(dt: NaiveDateTime) -> Result<Self> {
        let (hour, minute, second, microsecond) = clock(&dt)?;
        Date::try_from(dt.date())?.and_hms_micro(hour, minute, second, microsecond)
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
    let time = naive_time(dt.hour, dt.minute, dt.second, dt.microsecond, dt)?;
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
