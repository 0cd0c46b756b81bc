//! Channel versions in LangGraph's string format (see `docs/design.md`,
//! *Versions and ids*).

use std::fmt;

use crate::error::{Error, Result};
use crate::serde::Value;

/// The version of a channel: LangGraph's string form
/// (`00000000000000000000000000000003.0.8444218515250481`), or the plain
/// integers (and floats) older writers and test suites use.
///
/// # Order
///
/// Versions compare as LangGraph's runtime compares them to decide whether a
/// channel changed since a node last saw it: strings by their bytes (the
/// 32-digit counter first, so a later version is greater), numbers by value.
/// Python cannot compare a string with a number, and no saver mixes them; so
/// that the order is total, every number sorts before every string, an
/// integer before a float of the same value, and floats by
/// [`f64::total_cmp`] (equality of floats is by bits, so the order and `==`
/// agree).
///
/// ```
/// use checkpointer::version::{next_version, ChannelVersion};
/// let v1 = next_version(None)?;
/// let v2 = next_version(Some(&v1))?;
/// assert!(v2 > v1);
/// assert!(ChannelVersion::Int(10) > ChannelVersion::Int(9));
/// assert!(ChannelVersion::Int(10) < v1); // numbers before strings
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Debug, Clone)]
pub enum ChannelVersion {
    /// `<32-digit counter>.<random fraction>`.
    Str(String),
    /// A plain integer version.
    Int(i64),
    /// A float version (accepted on read, never produced).
    Float(f64),
}

impl ChannelVersion {
    /// The integer counter: the part before the first `.` of a string version
    /// read as Python's `int()` reads it ([`python_int`]), the integer
    /// itself, or the truncated float. `None` when a string version has no
    /// counter Python reads, or the counter does not fit an `i64`.
    pub fn counter(&self) -> Option<i64> {
        match self {
            ChannelVersion::Str(s) => {
                let (negative, digits) = python_int(s.split('.').next().unwrap_or(""))?;
                let magnitude: i128 = digits.parse().ok()?;
                i64::try_from(if negative { -magnitude } else { magnitude }).ok()
            }
            ChannelVersion::Int(i) => Some(*i),
            // exact for every float strictly inside (-2^63, 2^63)
            ChannelVersion::Float(f) if f.is_finite() && f.abs() < 9_223_372_036_854_775_808.0 => {
                Some(f.trunc() as i64)
            }
            ChannelVersion::Float(_) => None,
        }
    }

    /// The version as the stored msgpack/JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            ChannelVersion::Str(s) => Value::Str(s.as_str().into()),
            ChannelVersion::Int(i) => Value::Int(*i),
            ChannelVersion::Float(f) => Value::Float(*f),
        }
    }

    /// Reads a stored version; `None` for any other kind of value.
    pub fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Str(s) => Some(ChannelVersion::Str(s.as_str().to_owned())),
            Value::Int(i) => Some(ChannelVersion::Int(*i)),
            Value::Float(f) => Some(ChannelVersion::Float(*f)),
            Value::F32(f) => Some(ChannelVersion::Float(f64::from(*f))),
            _ => None,
        }
    }
}

impl PartialEq for ChannelVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for ChannelVersion {}

impl PartialOrd for ChannelVersion {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ChannelVersion {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        use ChannelVersion::{Float, Int, Str};
        match (self, other) {
            (Str(a), Str(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Str(_), _) => Ordering::Greater,
            (_, Str(_)) => Ordering::Less,
            (Int(a), Int(b)) => a.cmp(b),
            (Float(a), Float(b)) => a.total_cmp(b),
            (Int(a), Float(b)) => int_float(*a, *b).then(Ordering::Less),
            (Float(a), Int(b)) => int_float(*b, *a).reverse().then(Ordering::Greater),
        }
    }
}

/// `i` against `f` by value, exactly (no rounding of large integers); NaN
/// sorts after every integer, as `total_cmp` puts it after every number.
fn int_float(i: i64, f: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    if f.is_nan() {
        return if f.is_sign_negative() {
            Ordering::Greater
        } else {
            Ordering::Less
        };
    }
    // every i64 lies in [-2^63, 2^63)
    if f >= 9_223_372_036_854_775_808.0 {
        return Ordering::Less;
    }
    if f < -9_223_372_036_854_775_808.0 {
        return Ordering::Greater;
    }
    let whole = f.trunc();
    match i.cmp(&(whole as i64)) {
        Ordering::Equal if f > whole => Ordering::Less,
        Ordering::Equal if f < whole => Ordering::Greater,
        other => other,
    }
}

/// Python's `str(version)`: how a version is written into blob keys.
impl fmt::Display for ChannelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelVersion::Str(s) => f.write_str(s),
            ChannelVersion::Int(i) => write!(f, "{i}"),
            ChannelVersion::Float(x) => f.write_str(&crate::serde::py_float_repr(*x)),
        }
    }
}

impl From<&str> for ChannelVersion {
    fn from(s: &str) -> Self {
        ChannelVersion::Str(s.to_owned())
    }
}

impl From<String> for ChannelVersion {
    fn from(s: String) -> Self {
        ChannelVersion::Str(s)
    }
}

impl From<i64> for ChannelVersion {
    fn from(i: i64) -> Self {
        ChannelVersion::Int(i)
    }
}

/// The version after `current`, as LangGraph's savers make it: the counter plus
/// one as 32 zero-padded digits, a `.`, then a random fraction in Python's
/// `format(random.random(), "016")` form.
///
/// The counter of a string version is read as Python reads it,
/// `int(current.split(".")[0])` ([`python_int`]): surrounding whitespace, a
/// sign, single underscores between digits and any Unicode decimal digit
/// are accepted, so a thread that Python numbered continues with Python's
/// next number.
///
/// The fraction is drawn with 16 decimal places (as many values as Python's
/// 53-bit `random()`), so its text is at most 18 characters where Python's
/// `repr` of a full-precision float often takes 19: versions, stored in every
/// checkpoint, come out no longer than Python's (17.9 characters on average
/// against 18.3), while the format and ordering stay LangGraph's.
///
/// ```
/// use checkpointer::version::{next_version, ChannelVersion};
/// let v1 = next_version(None)?;
/// assert!(v1.to_string().starts_with("00000000000000000000000000000001."));
/// let v8 = next_version(Some(&ChannelVersion::Int(7)))?;
/// assert_eq!(v8.counter(), Some(8));
/// // Python's int() reads "1_000" as 1000, but the next version,
/// // 0…01001, would sort below "1_000.5": refused, never a step back.
/// assert!(next_version(Some(&ChannelVersion::from("1_000.5"))).is_err());
/// assert_eq!(next_version(Some(&ChannelVersion::from(" +7.5")))?.counter(), Some(8));
/// # Ok::<(), checkpointer::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidInput`] when `current` has no counter Python's `int()`
/// reads (so Python's saver would raise too), a counter of more digits than
/// Python converts (4300), a float version that is not finite, or when the
/// next version would not sort above `current` (a counter past 32 digits,
/// a negative or unpadded string counter, one written with underscores or
/// non-ASCII digits): a version that sorts below the current one would make
/// a runtime miss the channel's change.
pub fn next_version(current: Option<&ChannelVersion>) -> Result<ChannelVersion> {
    next_above(current, &random_fraction())
}

/// The first version of a channel (counter 1, random fraction):
/// `next_version(None)`, which cannot fail.
pub fn first_version() -> ChannelVersion {
    with_fraction("1".to_owned(), &random_fraction())
}

/// A random fraction in [0.1, 1) with 15 significant digits, as Python's
/// `repr` prints the double nearest it. Any decimal of at most 15
/// significant digits round-trips through a double, and no shorter decimal
/// names the same double (doubles in [0.1, 1) lie less than 10^-15 apart),
/// so its digits without trailing zeros are that repr: written directly,
/// without formatting a float (which cost more than the put it serves).
fn random_fraction() -> String {
    const LOW: u64 = 100_000_000_000_000; // 10^14
    let k = rand::random_range(LOW..10 * LOW);
    let mut text = format!("0.{k}");
    while text.ends_with('0') {
        text.pop();
    }
    text
}

/// [`next_version`] with the random fraction given (deterministic, for tests
/// and replay).
///
/// The counter has no upper bound of its own, as Python's integers have
/// none: a counter beyond `i64::MAX` keeps counting in decimal, never
/// wrapping or starting over. Past 32 digits Python's `f"{n:032}"` grows
/// longer and sorts below the 32-digit versions before it; that version is
/// refused.
///
/// # Errors
/// As [`next_version`].
pub fn next_version_with(current: Option<&ChannelVersion>, fraction: f64) -> Result<ChannelVersion> {
    next_above(current, &crate::serde::py_float_repr(fraction))
}

/// The next version with `fraction`, checked to sort above `current`.
fn next_above(current: Option<&ChannelVersion>, fraction: &str) -> Result<ChannelVersion> {
    let next = with_fraction(next_counter(current)?, fraction);
    match current {
        Some(current) if next <= *current => Err(Error::invalid(format!(
            "channel version {} would not sort above {}: its counter cannot be continued",
            shown(&next.to_string()),
            shown(&current.to_string())
        ))),
        _ => Ok(next),
    }
}

/// A version as an error shows it: its first 80 characters, quoted.
fn shown(version: &str) -> String {
    const MAX: usize = 80;
    match version.char_indices().nth(MAX) {
        Some((at, _)) => format!("{:?}…", &version[..at]),
        None => format!("{version:?}"),
    }
}

/// `<counter>.<fraction>` as Python's `f"{counter:032}.{fraction:016}"`
/// prints them, `fraction` being the float's repr.
fn with_fraction(counter: String, fraction: &str) -> ChannelVersion {
    // padded by hand: `format!`'s fill writes one character at a time
    const ZEROS: &str = "00000000000000000000000000000000";
    let (sign, magnitude, width) = match counter.strip_prefix('-') {
        Some(magnitude) => ("-", magnitude, 31usize),
        None => ("", counter.as_str(), 32),
    };
    let (counter_pad, fraction_pad) = (
        width.saturating_sub(magnitude.len()),
        16usize.saturating_sub(fraction.len()),
    );
    let mut out = String::with_capacity(sign.len() + counter_pad + magnitude.len() + 1 + fraction_pad + fraction.len());
    out.push_str(sign);
    out.push_str(&ZEROS[..counter_pad]);
    out.push_str(magnitude);
    out.push('.');
    out.push_str(&ZEROS[..fraction_pad]);
    out.push_str(fraction);
    ChannelVersion::Str(out)
}

/// The decimal digits of the counter after `current` (with a leading `-`
/// for a negative one).
fn next_counter(current: Option<&ChannelVersion>) -> Result<String> {
    match current {
        None => Ok("1".to_owned()),
        Some(ChannelVersion::Int(i)) => Ok((i128::from(*i) + 1).to_string()),
        Some(ChannelVersion::Float(f)) if f.is_finite() => {
            let whole = f.trunc();
            if whole.abs() < 1e18 {
                // exact: |whole| < 2^63
                Ok(((whole as i64) + 1).to_string())
            } else {
                // Python's `int(f)` of a large float is exact: its decimal digits.
                let digits = format!("{:.0}", whole.abs());
                Ok(if whole < 0.0 {
                    format!("-{}", decrement_digits(&digits))
                } else {
                    increment_digits(&digits)
                })
            }
        }
        Some(ChannelVersion::Float(f)) => Err(Error::invalid(format!(
            "channel version {f} has no counter to continue"
        ))),
        Some(ChannelVersion::Str(s)) => {
            let head = s.split('.').next().unwrap_or("");
            let (negative, digits) = python_int(head).ok_or_else(|| {
                Error::invalid(format!(
                    "channel version {} has no counter Python's int() reads",
                    shown(s)
                ))
            })?;
            Ok(match (negative, digits.as_str()) {
                (_, "0") => "1".to_owned(),
                (false, digits) => increment_digits(digits),
                // -n + 1 = -(n - 1)
                (true, "1") => "0".to_owned(),
                (true, digits) => format!("-{}", decrement_digits(digits)),
            })
        }
    }
}

/// The most digits Python's `int()` converts from a string (its
/// `sys.get_int_max_str_digits()` default, counting leading zeros, not
/// underscores); past it Python raises `ValueError`.
pub const PYTHON_MAX_STR_DIGITS: usize = 4300;

/// Reads `text` as Python's `int(text)` does, returning the sign (`true`
/// for negative) and the ASCII digits of the magnitude without leading
/// zeros (`"0"` for zero); `None` where Python raises `ValueError`.
///
/// What Python accepts: whitespace around the number (ASCII space, `\t`,
/// `\n`, `\v`, `\f`, `\r`, and the Unicode spaces Python's `str.isspace`
/// names outside ASCII except U+001C–U+001F), one `+` or `-`, then decimal
/// digits of any script (Unicode category Nd, as of Python 3.11's Unicode
/// 14.0), single `_` between digits, at most [`PYTHON_MAX_STR_DIGITS`]
/// digits.
///
/// ```
/// use checkpointer::version::python_int;
/// assert_eq!(python_int(" +1_000 "), Some((false, "1000".to_owned())));
/// assert_eq!(python_int("\u{0661}\u{0663}"), Some((false, "13".to_owned()))); // Arabic-Indic 13
/// assert_eq!(python_int("-007"), Some((true, "7".to_owned())));
/// assert_eq!(python_int("1__0"), None);
/// assert_eq!(python_int("_1"), None);
/// assert_eq!(python_int(""), None);
/// ```
pub fn python_int(text: &str) -> Option<(bool, String)> {
    let body = text.trim_matches(is_python_space);
    let (negative, body) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    let mut out = String::new();
    let mut count = 0usize;
    let mut after_digit = false;
    for c in body.chars() {
        if c == '_' {
            if !after_digit {
                return None; // leading or doubled underscore
            }
            after_digit = false;
            continue;
        }
        let digit = decimal_digit(c)?;
        count += 1;
        if count > PYTHON_MAX_STR_DIGITS {
            return None;
        }
        after_digit = true;
        if !(out.is_empty() && digit == 0) {
            out.push(char::from(b'0' + digit));
        }
    }
    if !after_digit {
        return None; // empty, or a trailing underscore
    }
    if out.is_empty() {
        out.push('0');
    }
    Some((negative && out != "0", out))
}

/// The whitespace Python's `int()` strips: ASCII `\t\n\v\f\r` and space,
/// and the non-ASCII characters of `str.isspace`.
fn is_python_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{85}' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// The digit zero of every run of decimal digits (Unicode category Nd) in
/// Unicode 14.0, the version Python 3.11 uses: each run holds the ten
/// digits 0–9 in order.
const DECIMAL_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6, 0xE50, 0xED0,
    0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620,
    0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10, 0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0,
    0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60,
    0x16AC0, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// The value of a decimal digit of any script, `None` for anything else.
fn decimal_digit(c: char) -> Option<u8> {
    let cp = u32::from(c);
    let at = DECIMAL_ZEROS.partition_point(|zero| *zero <= cp).checked_sub(1)?;
    let offset = cp - DECIMAL_ZEROS[at];
    u8::try_from(offset).ok().filter(|d| *d < 10)
}

/// `digits` (ASCII decimal, no leading zeros) plus one.
fn increment_digits(digits: &str) -> String {
    let trimmed = digits.trim_start_matches('0');
    let mut out: Vec<u8> = trimmed.bytes().collect();
    let mut i = out.len();
    loop {
        if i == 0 {
            out.insert(0, b'1');
            break;
        }
        i -= 1;
        if out[i] == b'9' {
            out[i] = b'0';
        } else {
            out[i] += 1;
            break;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| "1".to_owned())
}

/// `digits` (ASCII decimal, no leading zeros, at least 1) minus one,
/// without leading zeros.
fn decrement_digits(digits: &str) -> String {
    let mut out: Vec<u8> = digits.trim_start_matches('0').bytes().collect();
    let mut i = out.len();
    while i > 0 {
        i -= 1;
        if out[i] == b'0' {
            out[i] = b'9';
        } else {
            out[i] -= 1;
            break;
        }
    }
    let text = String::from_utf8(out).unwrap_or_default();
    match text.trim_start_matches('0') {
        "" => "0".to_owned(),
        t => t.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_total_and_agrees_with_eq() {
        let vs = [
            ChannelVersion::Int(-3),
            ChannelVersion::Int(0),
            ChannelVersion::Int(9_007_199_254_740_993),
            ChannelVersion::Float(-0.0),
            ChannelVersion::Float(0.0),
            ChannelVersion::Float(0.5),
            ChannelVersion::Float(9_007_199_254_740_992.0),
            ChannelVersion::Float(f64::NAN),
            ChannelVersion::Float(f64::INFINITY),
            ChannelVersion::Int(i64::MAX),
            ChannelVersion::from("00000000000000000000000000000001.0.5"),
            ChannelVersion::from("00000000000000000000000000000002.0.1"),
            ChannelVersion::from("x"),
        ];
        for a in &vs {
            assert_eq!(a.cmp(a), std::cmp::Ordering::Equal);
            assert_eq!(a, a);
            for b in &vs {
                assert_eq!(a.cmp(b), b.cmp(a).reverse(), "{a:?} {b:?}");
                assert_eq!(a == b, a.cmp(b) == std::cmp::Ordering::Equal);
                for c in &vs {
                    if a < b && b < c {
                        assert!(a < c, "{a:?} < {b:?} < {c:?}");
                    }
                }
            }
        }
        assert!(ChannelVersion::Int(9_007_199_254_740_993) > ChannelVersion::Float(9_007_199_254_740_992.0));
        assert!(ChannelVersion::Int(0) < ChannelVersion::Float(0.0));
        assert!(ChannelVersion::Float(0.5) < ChannelVersion::Int(1));
    }

    #[test]
    fn random_fractions_keep_versions_short_and_ordered() {
        let mut prev = next_version(None).unwrap();
        let mut total = 0;
        for _ in 0..2000 {
            let v = next_version(Some(&prev)).unwrap();
            let text = v.to_string();
            let (counter, fraction) = text.split_once('.').unwrap();
            assert_eq!(counter.len(), 32);
            assert!(fraction.len() >= 16 && fraction.len() <= 18, "{text}");
            assert!(fraction.parse::<f64>().is_ok_and(|f| (0.0..1.0).contains(&f)), "{text}");
            assert!(text > prev.to_string());
            total += fraction.len();
            prev = v;
        }
        // Python's `format(random.random(), "016")` averages 18.3 characters.
        assert!(total as f64 / 2000.0 < 18.0, "{}", total as f64 / 2000.0);
    }

    /// The fraction written without formatting a float is the repr Python
    /// prints for the double it names: drawn ones, and the edges (fewest
    /// and most digits, trailing zeros).
    #[test]
    fn random_fractions_are_the_repr_of_their_double() {
        let edges = [
            "0.1",
            "0.999999999999999",
            "0.100000000000001",
            "0.12345",
            "0.5",
            "0.123456789012345",
        ];
        let drawn: Vec<String> = (0..50_000).map(|_| random_fraction()).collect();
        for text in edges.iter().map(|s| (*s).to_owned()).chain(drawn) {
            let value: f64 = text.parse().unwrap();
            assert_eq!(crate::serde::py_float_repr(value), text);
            assert!((0.1..1.0).contains(&value), "{text}");
            assert!(text.len() <= 17 && !text.ends_with('0'), "{text}");
        }
    }

    #[test]
    fn python_vectors() {
        // Python's fractions after random.seed(0) (docs/design.md, Versions and ids)
        let v1 = next_version_with(None, 0.8444218515250481).unwrap();
        assert_eq!(v1.to_string(), "00000000000000000000000000000001.0.8444218515250481");
        let v2 = next_version_with(Some(&v1), 0.7579544029403025).unwrap();
        assert_eq!(v2.to_string(), "00000000000000000000000000000002.0.7579544029403025");
        let v3 = next_version_with(Some(&v2), 0.420571580830845).unwrap();
        assert_eq!(v3.to_string(), "00000000000000000000000000000003.0.420571580830845");
        let v8 = next_version_with(Some(&ChannelVersion::Int(7)), 0.5).unwrap();
        assert_eq!(v8.to_string(), "00000000000000000000000000000008.00000000000000.5");
        let small = next_version_with(None, 1.5e-05).unwrap();
        assert_eq!(small.to_string(), "00000000000000000000000000000001.0000000001.5e-05");
    }

    #[test]
    fn counters_keep_counting_past_every_integer_width() {
        let next = |v: ChannelVersion| next_version_with(Some(&v), 0.5).unwrap().to_string();
        let head = |s: String| s.split_once('.').unwrap().0.to_owned();
        // 19 digits and beyond i64::MAX: counting on, never back to 1.
        assert_eq!(
            head(next(ChannelVersion::from("00000000000009999999999999999999.0.5"))),
            "00000000000010000000000000000000"
        );
        assert_eq!(
            head(next(ChannelVersion::from("00000000000009223372036854775807.0.1"))),
            "00000000000009223372036854775808"
        );
        assert_eq!(
            head(next(ChannelVersion::Int(i64::MAX))),
            "00000000000009223372036854775808"
        );
        // Past 32 digits Python's f"{n:032}" grows longer and would sort
        // below the current version: refused, not a step back.
        let full = "9".repeat(32);
        let err = next_version_with(Some(&ChannelVersion::from(format!("{full}.0.5"))), 0.5).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
        let long = format!("1{}", "0".repeat(39));
        assert_eq!(
            head(next(ChannelVersion::from(long.as_str()))),
            format!("1{}1", "0".repeat(38))
        );
        // Versions keep ordering as strings while they keep 32 digits.
        let mut prev = ChannelVersion::from("00000000000000000000000000000098.0.5");
        for _ in 0..5 {
            let v = next_version_with(Some(&prev), 0.5).unwrap();
            assert!(v.to_string() > prev.to_string());
            prev = v;
        }
        // Negative integer versions step up as Python's do (`f"{-4:032}"`).
        assert_eq!(head(next(ChannelVersion::Int(-5))), "-0000000000000000000000000000004");
        assert_eq!(
            head(next(ChannelVersion::Float(1e30))),
            format!("{:0>32}", "1000000000000000019884624838657")
        );
    }

    #[test]
    fn counters() {
        assert_eq!(
            ChannelVersion::from("00000000000000000000000000000012.0.5").counter(),
            Some(12)
        );
        assert_eq!(ChannelVersion::from("7").counter(), Some(7));
        assert_eq!(ChannelVersion::from("x.1").counter(), None);
        assert_eq!(ChannelVersion::Float(2.0).to_string(), "2.0");
    }

    #[test]
    fn random_fraction_is_in_python_form() {
        for _ in 0..1000 {
            let s = next_version(None).unwrap().to_string();
            let (head, frac) = s.split_once('.').unwrap();
            assert_eq!(head.len(), 32);
            assert!(frac.len() >= 16, "{s}");
            let x: f64 = frac.trim_start_matches('0').parse().unwrap_or(0.0);
            assert!((0.0..1.0).contains(&x), "{s}");
        }
    }

    /// The version strings of the issue: Python's `int()` reads each; the
    /// two Python would number below the current version are refused.
    #[test]
    fn counters_python_reads_continue_or_are_refused() {
        let next = |s: &str| next_version_with(Some(&ChannelVersion::from(s)), 0.5);
        let head = |v: ChannelVersion| v.to_string().split_once('.').unwrap().0.to_owned();
        assert_eq!(head(next("+7.5").unwrap()), format!("{:032}", 8));
        assert_eq!(head(next(" 7.5").unwrap()), format!("{:032}", 8));
        for below in ["1_000.5", "\u{0661}\u{0663}.5", "-5.5", "7.5", "x.1", "", "1__0.5"] {
            let err = next(below).unwrap_err();
            assert!(matches!(err, Error::InvalidInput { .. }), "{below:?}: {err}");
        }
        assert_eq!(python_int("1_000"), Some((false, "1000".to_owned())));
        assert_eq!(python_int("\u{0661}\u{0663}"), Some((false, "13".to_owned())));
        assert_eq!(python_int("\u{1d7d9}\u{ff10}"), Some((false, "10".to_owned())));
        assert_eq!(python_int("\u{1c}7"), None, "Python's int() strips no U+001C");
        assert_eq!(
            python_int("\u{11f50}"),
            None,
            "Kawi digits are Unicode 15, not Python 3.11's 14"
        );
        assert_eq!(
            python_int(&"1".repeat(PYTHON_MAX_STR_DIGITS)).map(|(_, d)| d.len()),
            Some(4300)
        );
        assert_eq!(python_int(&"1".repeat(PYTHON_MAX_STR_DIGITS + 1)), None);
        assert_eq!(python_int("-0"), Some((false, "0".to_owned())));
        assert_eq!(ChannelVersion::from(" +1_000.5").counter(), Some(1000));
        assert_eq!(ChannelVersion::from("-12.5").counter(), Some(-12));
        assert_eq!(ChannelVersion::Float(1e300).counter(), None);
        assert!(next_version(Some(&ChannelVersion::Float(f64::NAN))).is_err());
        assert_eq!(
            head(next_version_with(Some(&ChannelVersion::Float(-1e30)), 0.5).unwrap()),
            "-1000000000000000019884624838655"
        );
    }

    // proptest comes with the `conformance` feature
    #[cfg(feature = "conformance")]
    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        /// Whitespace Python's `int()` strips.
        const SPACES: [char; 8] = [' ', '\t', '\n', '\r', '\u{85}', '\u{a0}', '\u{2007}', '\u{3000}'];

        /// A number spelled as Python's `int()` reads it, and its value
        /// (sign, ASCII digits without leading zeros).
        fn spelled() -> impl Strategy<Value = (String, (bool, String))> {
            let digit = (0..DECIMAL_ZEROS.len(), 0u32..10, any::<bool>());
            (
                proptest::collection::vec(0..SPACES.len(), 0..3),
                0..3u8,
                proptest::collection::vec(digit, 1..40),
                proptest::collection::vec(0..SPACES.len(), 0..3),
            )
                .prop_map(|(before, sign, digits, after)| {
                    let mut text: String = before.iter().map(|i| SPACES[*i]).collect();
                    text.push_str(["", "+", "-"][usize::from(sign)]);
                    let mut ascii = String::new();
                    for (i, (script, d, underscore)) in digits.iter().enumerate() {
                        if *underscore && i > 0 {
                            text.push('_');
                        }
                        text.push(char::from_u32(DECIMAL_ZEROS[*script] + d).unwrap());
                        ascii.push(char::from_digit(*d, 10).unwrap());
                    }
                    text.extend(after.iter().map(|i| SPACES[*i]));
                    let magnitude = match ascii.trim_start_matches('0') {
                        "" => "0".to_owned(),
                        m => m.to_owned(),
                    };
                    (text, (sign == 2 && magnitude != "0", magnitude))
                })
        }

        proptest! {
            #[test]
            fn python_int_reads_every_spelling((text, value) in spelled()) {
                prop_assert_eq!(python_int(&text), Some(value));
            }

            /// What Python refuses: a doubled, leading or trailing
            /// underscore, a second sign, an inner space, a non-digit.
            #[test]
            fn python_int_refuses_malformed((text, _) in spelled(), bad in 0..6usize, at in any::<prop::sample::Index>()) {
                let digits: Vec<usize> = text.char_indices().filter(|(_, c)| decimal_digit(*c).is_some()).map(|(i, _)| i).collect();
                let i = digits[at.index(digits.len())];
                let mut broken = text.clone();
                match bad {
                    0 => broken.insert_str(i, "__"),
                    1 => broken.insert(digits[0], '_'),
                    2 => { let end = text.trim_end_matches(is_python_space).len(); broken.insert(end, '_') }
                    3 => broken.insert_str(digits[0], "+-"),
                    4 if i > digits[0] => broken.insert(i, ' '),
                    _ => broken.insert(i, 'x'),
                }
                prop_assert_eq!(python_int(&broken), None, "{:?}", broken);
            }

            /// Never a step back: any string version either continues, with
            /// Python's number plus one and a version that sorts above, or
            /// is refused.
            #[test]
            fn next_versions_sort_above_or_are_refused(
                parts in proptest::collection::vec(prop::sample::select(vec![
                    "0", "1", "9", "_", "+", "-", " ", "\u{3000}", "\u{0661}", "x", ".", "0000000000000000000000000000000",
                    "99999999999999999999999999999999",
                ]), 0..8),
                fraction in 0.0f64..1.0,
            ) {
                let text: String = parts.concat();
                let current = ChannelVersion::from(text.as_str());
                match next_version_with(Some(&current), fraction) {
                    Ok(next) => {
                        prop_assert!(next > current, "{:?} -> {:?}", text, next);
                        let (negative, digits) = python_int(text.split('.').next().unwrap()).unwrap();
                        if digits.len() <= 36 {
                            let m: i128 = digits.parse().unwrap();
                            let want = if negative { 1 - m } else { m + 1 };
                            prop_assert_eq!(next.to_string().split('.').next().unwrap().parse::<i128>().unwrap(), want);
                        }
                    }
                    Err(e) => { let typed = matches!(e, Error::InvalidInput { .. }); prop_assert!(typed, "{}", e) }
                }
            }

            /// Integer versions always continue, by one, above themselves.
            #[test]
            fn integer_versions_continue(i in any::<i64>()) {
                let next = next_version_with(Some(&ChannelVersion::Int(i)), 0.5).unwrap();
                prop_assert!(next > ChannelVersion::Int(i));
                let head = next.to_string().split_once('.').unwrap().0.to_owned();
                prop_assert_eq!(head.parse::<i128>().unwrap(), i128::from(i) + 1);
            }

            /// Padded counters below 10^32 − 1 step up by one and sort above.
            #[test]
            fn padded_counters_step_up(n in 0u128..99_999_999_999_999_999_999_999_999_999_999) {
                let current = ChannelVersion::from(format!("{n:032}.0.5"));
                let next = next_version_with(Some(&current), 0.25).unwrap();
                prop_assert_eq!(next.to_string(), format!("{:032}.0000000000000.25", n + 1));
                prop_assert!(next > current);
            }
        }
    }
}
