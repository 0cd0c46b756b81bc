//! Python's `str()` and `isoformat()` of the `uuid` and `datetime` values
//! `read_fixtures.py` prints as text.

use std::fmt::Write as _;

use super::ints;
use crate::serde::Value;

pub(super) fn dashed_uuid(hex: &str) -> Option<String> {
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let h = hex.to_ascii_lowercase();
    Some(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// Python's `str(timedelta(days, seconds, microseconds))` for a normalised
/// timedelta (0 <= seconds < 86400, 0 <= microseconds < 10^6).
pub(super) fn timedelta_str(days: i64, seconds: i64, micros: i64) -> String {
    let mut s = String::new();
    if days != 0 {
        let plural = if days.abs() != 1 { "s" } else { "" };
        let _ = write!(s, "{days} day{plural}, ");
    }
    let _ = write!(s, "{}:{:02}:{:02}", seconds / 3600, seconds % 3600 / 60, seconds % 60);
    if micros != 0 {
        let _ = write!(s, ".{micros:06}");
    }
    s
}

/// The offset of a timezone payload (`[timedelta]` or `[timedelta, name]`)
/// in seconds and microseconds, and its name.
fn timezone_parts(arg: &Value) -> Option<(i64, i64, Option<&str>)> {
    let args = arg.as_array()?;
    let offset = args.first()?.as_ext()?;
    if offset.module() != Some("datetime") || offset.name() != Some("timedelta") {
        return None;
    }
    let d = ints(offset.arg()?)?;
    let [days, seconds, micros] = d[..] else {
        return None;
    };
    let name = match args.get(1) {
        Some(n) => Some(n.as_str()?),
        None => None,
    };
    Some((days * 86_400 + seconds, micros, name))
}

/// `±HH:MM[:SS[.ffffff]]` for an offset given as seconds + microseconds.
fn offset_str(seconds: i64, micros: i64) -> String {
    let total = seconds * 1_000_000 + micros;
    let sign = if total < 0 { '-' } else { '+' };
    let total = total.abs();
    let (secs, us) = (total / 1_000_000, total % 1_000_000);
    let mut s = format!("{sign}{:02}:{:02}", secs / 3600, secs % 3600 / 60);
    if secs % 60 != 0 || us != 0 {
        let _ = write!(s, ":{:02}", secs % 60);
    }
    if us != 0 {
        let _ = write!(s, ".{us:06}");
    }
    s
}

/// Python's `str(timezone)`.
pub(super) fn timezone_str(arg: &Value) -> Option<String> {
    let (seconds, micros, name) = timezone_parts(arg)?;
    Some(match name {
        Some(n) => n.to_owned(),
        None if seconds == 0 && micros == 0 => "UTC".to_owned(),
        None => format!("UTC{}", offset_str(seconds, micros)),
    })
}

/// Python's `time.isoformat()` from the keyword payload of ext 2.
pub(super) fn time_iso(arg: &Value) -> Option<String> {
    let field = |k: &str| arg.get(k).and_then(Value::as_i64);
    let (h, m, s, us) = (
        field("hour")?,
        field("minute")?,
        field("second")?,
        field("microsecond")?,
    );
    let mut out = format!("{h:02}:{m:02}:{s:02}");
    if us != 0 {
        let _ = write!(out, ".{us:06}");
    }
    match arg.get("tzinfo") {
        None | Some(Value::Nil) => {}
        Some(Value::Ext(tz)) if tz.module() == Some("datetime") && tz.name() == Some("timezone") => {
            let (seconds, micros, _) = timezone_parts(tz.arg()?)?;
            out.push_str(&offset_str(seconds, micros));
        }
        Some(_) => return None,
    }
    Some(out)
}
