//! A checkpoint's `ts` (RFC 3339, as Python's `datetime.isoformat()` and
//! this crate write it) as microseconds since the Unix epoch.

/// `ts` as µs since the epoch, or `None` when it does not read as
/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (a space may stand for `T`).
pub(crate) fn parse_ts_micros(ts: &str) -> Option<i64> {
    let b = ts.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from.checked_add(len)?)?;
        digits.iter().try_fold(0i64, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
        })
    };
    let sep = |at: usize, want: &[u8]| b.get(at).is_some_and(|c| want.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut at = 19;
    let mut micros = 0i64;
    if sep(at, b".,") {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 6 {
                micros = micros * 10 + i64::from(b[at] - b'0');
            }
            at += 1;
        }
        let len = at - start;
        if len == 0 {
            return None;
        }
        for _ in len..6 {
            micros *= 10;
        }
    }
    let offset = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(&s @ (b'+' | b'-')) if at + 6 == b.len() && sep(at + 3, b":") => {
            let (h, m) = (num(at + 1, 2)?, num(at + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            if s == b'+' {
                secs
            } else {
                -secs
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_ts_micros as p;

    #[test]
    fn reads_python_and_rfc3339_forms() {
        assert_eq!(p("1970-01-01T00:00:00+00:00"), Some(0));
        assert_eq!(p("1970-01-01T00:00:01Z"), Some(1_000_000));
        assert_eq!(p("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(p("1969-12-31T23:00:00-01:00"), Some(0));
        assert_eq!(p("2024-07-31T20:14:19.804150+00:00"), Some(1_722_456_859_804_150));
        assert_eq!(p("2024-07-31T20:14:19.8+00:00"), Some(1_722_456_859_800_000));
        assert_eq!(p("2024-07-31 20:14:19.804150123Z"), Some(1_722_456_859_804_150));
        assert_eq!(p("2000-02-29T00:00:00Z"), Some(951_782_400_000_000));
    }

    #[test]
    fn refuses_what_is_not_an_instant() {
        for bad in [
            "",
            "2024-07-31",
            "2024-07-31T20:14:19",
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-07-31T24:00:00Z",
            "2024-07-31T20:14:19.+00:00",
            "2024-07-31T20:14:19+0000",
            "2024-07-31T20:14:19Zx",
            "２024-07-31T20:14:19Z",
        ] {
            assert_eq!(p(bad), None, "{bad}");
        }
    }
}
