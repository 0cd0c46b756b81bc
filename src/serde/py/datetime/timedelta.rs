//! `datetime.timedelta`.

use super::{int_args, MAX_DAYS, MICROS_PER_DAY, MICROS_PER_SECOND};
use crate::error::{Error, Result};
use crate::serde::py::{as_serde, read_arg, via_value, CONSTRUCTOR_POS_ARGS};
use crate::serde::Value;

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
        TimeDelta::from_microseconds(micros(days.into(), seconds.into(), microseconds.into()))
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
        micros(self.days.into(), self.seconds.into(), self.microseconds.into())
    }

    /// The extension Python writes for this duration (as normalised from the
    /// fields' total).
    pub fn to_value(&self) -> Value {
        let n = TimeDelta::from_microseconds(self.total_microseconds()).unwrap_or(*self);
        int_args("timedelta", [n.days, n.seconds, n.microseconds])
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

/// The microseconds in a duration, as Python's constructor adds them up.
fn micros(days: i128, seconds: i128, microseconds: i128) -> i128 {
    days * MICROS_PER_DAY + seconds * i128::from(MICROS_PER_SECOND) + microseconds
}
