//! What the store's rows hold, as Python's `SqliteStore` writes them: the
//! prefix (labels joined by `.`), the value (compact JSON, a BLOB), the
//! times (text), the vectors (little-endian `f32` blobs), and
//! `vec_distance_cosine`, sqlite-vec's function, computed as sqlite-vec does.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde_json::{Map, Value};

use crate::sqlite::error::sql_error;
use crate::store::{Item, Namespace};
use crate::{Error, Result};

/// `datetime`'s `str()` of a UTC time, as Python's store writes
/// `expires_at`: `2026-12-07 12:48:30.123456+00:00`, the fraction left out
/// when zero. Text comparison orders these as time, and also against
/// SQLite's `CURRENT_TIMESTAMP` form (`2026-12-07 12:48:30`) that Python's
/// TTL refresh writes, which sorts before every time of the same second.
pub(crate) fn py_time(t: SystemTime) -> String {
    let micros = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_micros()).map_or(i64::MIN, |m| -m),
    };
    crate::id::iso_from_unix_micros(micros).replacen('T', " ", 1)
}

/// Parses a stored time: `YYYY-MM-DD[ T]HH:MM:SS[.f…][Z|±HH:MM]` (Python's
/// `str(datetime)`, SQLite's `CURRENT_TIMESTAMP`); no offset means UTC.
pub(crate) fn parse_time(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| digits.iter().fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b' ' | b'T') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 6 {
                micros = micros * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..6 {
            micros *= 10;
        }
    }
    let offset = match b.get(i) {
        None => 0,
        Some(b'Z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == i + 6 && b[i + 3] == b':' => {
            let minutes = num(i + 1, 2)? * 60 + num(i + 4, 2)?;
            if *sign == b'+' {
                minutes
            } else {
                -minutes
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset * 60;
    let total = i128::from(secs) * 1_000_000 + i128::from(micros);
    let abs = Duration::from_micros(u64::try_from(total.unsigned_abs()).ok()?);
    if total >= 0 {
        UNIX_EPOCH.checked_add(abs)
    } else {
        UNIX_EPOCH.checked_sub(abs)
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn corrupt(what: impl std::fmt::Display) -> Error {
    Error::storage("sqlite", false, format!("unreadable store row: {what}"))
}

/// The namespace of a stored `prefix`.
pub(crate) fn namespace(prefix: &str) -> Result<Namespace> {
    Namespace::new(prefix.split('.')).map_err(|e| corrupt(format!("prefix {prefix:?}: {e}")))
}

/// A stored value: JSON text or bytes holding an object.
pub(crate) fn value(raw: ValueRef<'_>) -> Result<Map<String, Value>> {
    let bytes = match raw {
        ValueRef::Text(b) | ValueRef::Blob(b) => b,
        other => return Err(corrupt(format!("a value of type {}", other.data_type()))),
    };
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(corrupt("a value that is not a JSON object")),
        Err(e) => Err(corrupt(format!("a value that is not JSON: {e}"))),
    }
}

fn time(raw: ValueRef<'_>, column: &str) -> Result<SystemTime> {
    match raw {
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()
            .and_then(parse_time)
            .ok_or_else(|| corrupt(format!("{column} {:?}", String::from_utf8_lossy(t)))),
        // a row inserted without the column (SQLite's default applies otherwise)
        ValueRef::Null => Ok(UNIX_EPOCH),
        other => Err(corrupt(format!("{column} of type {}", other.data_type()))),
    }
}

/// An item read from `prefix, key, value, created_at, updated_at` at
/// columns `0..5`, and its `ttl_minutes` (column 5).
pub(crate) fn item(row: &rusqlite::Row<'_>) -> Result<(Item, Option<f64>)> {
    item_with(row, None)
}

/// As [`item`], with the value when it was already decoded.
pub(crate) fn item_with(row: &rusqlite::Row<'_>, value: Option<Map<String, Value>>) -> Result<(Item, Option<f64>)> {
    let value = match value {
        Some(v) => v,
        None => self::value(row.get_ref(2).map_err(sql_error)?)?,
    };
    let prefix = row.get_ref(0).map_err(sql_error)?;
    let prefix = prefix.as_str().map_err(|e| corrupt(format!("prefix: {e}")))?;
    let item = Item {
        namespace: namespace(prefix)?,
        key: row.get(1).map_err(sql_error)?,
        value,
        created_at: time(row.get_ref(3).map_err(sql_error)?, "created_at")?,
        updated_at: time(row.get_ref(4).map_err(sql_error)?, "updated_at")?,
    };
    let ttl: Option<f64> = row.get(5).map_err(sql_error)?;
    Ok((item, ttl))
}

/// A vector as sqlite-vec's `serialize_float32` writes it.
pub(crate) fn vector_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// The name of sqlite-vec's cosine distance, which Python's store calls.
pub(crate) const FN_DISTANCE_COSINE: &str = "vec_distance_cosine";

/// sqlite-vec's `vec_distance_cosine` of two float32 blobs, as it computes
/// it (0.1.x, `distance_cosine_float`): the dot product and both squared
/// norms summed in `f32`, in order; `1 - dot / (sqrt(a) * sqrt(b))` in
/// `f64`, rounded to `f32`. A zero vector gives NaN, which SQLite turns
/// into NULL, as it does for the extension.
pub(crate) fn distance_cosine(a: &[u8], b: &[u8]) -> std::result::Result<f64, String> {
    if a.len() != b.len() {
        return Err(format!("Vector dimension mismatch: {} and {} bytes", a.len(), b.len()));
    }
    if a.is_empty() || a.len() % 4 != 0 {
        return Err(format!("a float32 vector blob of {} bytes", a.len()));
    }
    let b: Vec<f32> = b
        .chunks_exact(4)
        .map(|y| f32::from_le_bytes([y[0], y[1], y[2], y[3]]))
        .collect();
    Cosine::new(&b).distance(a)
}

/// One side of [`distance_cosine`] fixed (a search's query): its squared
/// norm summed once, in sqlite-vec's order, so each stored vector costs
/// only its dot product and its own norm, with the same bits.
pub(crate) struct Cosine<'q> {
    query: &'q [f32],
    mag: f32,
}

impl<'q> Cosine<'q> {
    pub(crate) fn new(query: &'q [f32]) -> Self {
        let mut mag = 0f32;
        for y in query {
            mag += y * y;
        }
        Cosine { query, mag }
    }

    /// `vec_distance_cosine(stored, query)`.
    pub(crate) fn distance(&self, stored: &[u8]) -> std::result::Result<f64, String> {
        if stored.len() != self.query.len() * 4 {
            return Err(format!(
                "Vector dimension mismatch: {} and {} bytes",
                stored.len(),
                self.query.len() * 4
            ));
        }
        if stored.is_empty() {
            return Err("a float32 vector blob of 0 bytes".to_owned());
        }
        let (mut dot, mut a_mag) = (0f32, 0f32);
        for (x, y) in stored.chunks_exact(4).zip(self.query) {
            let x = f32::from_le_bytes([x[0], x[1], x[2], x[3]]);
            dot += x * y;
            a_mag += x * x;
        }
        let distance = 1.0 - f64::from(dot) / (f64::from(a_mag).sqrt() * f64::from(self.mag).sqrt());
        #[allow(clippy::cast_possible_truncation)] // sqlite-vec returns an f32
        Ok(f64::from(distance as f32))
    }
}

/// The error a stored embedding that is not a float32 blob gives, as the
/// SQL function reports it.
pub(crate) fn not_a_vector(raw: ValueRef<'_>) -> String {
    format!("a vector must be a float32 blob, not {}", raw.data_type())
}

/// Registers [`FN_DISTANCE_COSINE`] and the walk's step counter
/// (`super::search`) on a connection of this crate (nothing in the file
/// refers to them; Python loads the extension instead).
pub(crate) fn register_vector_functions(conn: &Connection) -> Result<()> {
    super::search::register_walk_guard(conn)?;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function(FN_DISTANCE_COSINE, 2, flags, |ctx| {
        let blob = |i| match ctx.get_raw(i) {
            ValueRef::Blob(b) => Ok(b),
            other => Err(rusqlite::Error::UserFunctionError(not_a_vector(other).into())),
        };
        distance_cosine(blob(0)?, blob(1)?).map_err(|e| rusqlite::Error::UserFunctionError(e.into()))
    })
    .map_err(sql_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_and_read_python_forms() {
        let t = UNIX_EPOCH + Duration::from_micros(1_765_111_710_123_456);
        assert_eq!(py_time(t), "2025-12-07 12:48:30.123456+00:00");
        assert_eq!(parse_time(&py_time(t)), Some(t));
        let whole = UNIX_EPOCH + Duration::from_secs(1_765_111_710);
        assert_eq!(py_time(whole), "2025-12-07 12:48:30+00:00");
        assert_eq!(parse_time("2025-12-07 12:48:30"), Some(whole));
        assert_eq!(parse_time("2025-12-07T13:48:30+01:00"), Some(whole));
        assert_eq!(
            parse_time("2025-12-07 12:48:30.5"),
            Some(whole + Duration::from_millis(500))
        );
        assert_eq!(parse_time("2025-13-07 12:48:30"), None);
        assert_eq!(parse_time("yesterday"), None);
        // text order is time order across the forms
        assert!("2025-12-07 12:48:30" < py_time(whole).as_str());
        assert!(py_time(whole) < py_time(whole + Duration::from_micros(1)));
    }

    #[test]
    fn cosine_distance_as_sqlite_vec() {
        let a = vector_blob(&[1.0, 2.0, 0.0, 3.0]);
        let b = vector_blob(&[0.0, 1.0, 5.0, 3.0]);
        // the value sqlite-vec 0.1.9 gives for this pair (1 - distance)
        assert_eq!(1.0 - distance_cosine(&a, &b).unwrap(), 0.4969293475151062);
        assert!(distance_cosine(&a, &vector_blob(&[1.0])).is_err());
        assert!(distance_cosine(&vector_blob(&[0.0, 0.0]), &vector_blob(&[1.0, 0.0]))
            .unwrap()
            .is_nan());
    }
}
