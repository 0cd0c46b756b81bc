//! Channel versions in LangGraph's string format (see `docs/design.md`,
//! *Versions and ids*).

use std::fmt;

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
/// let v1 = next_version(None);
/// let v2 = next_version(Some(&v1));
/// assert!(v2 > v1);
/// assert!(ChannelVersion::Int(10) > ChannelVersion::Int(9));
/// assert!(ChannelVersion::Int(10) < v1); // numbers before strings
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
    /// The integer counter: the part before the first `.` of a string version,
    /// the integer itself, or the truncated float. `None` when a string version
    /// does not start with digits.
    pub fn counter(&self) -> Option<i64> {
        match self {
            ChannelVersion::Str(s) => {
                let head = s.split('.').next().unwrap_or("");
                if head.is_empty() || !head.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let trimmed = head.trim_start_matches('0');
                if trimmed.is_empty() {
                    Some(0)
                } else {
                    trimmed.parse().ok()
                }
            }
            ChannelVersion::Int(i) => Some(*i),
            ChannelVersion::Float(f) if f.is_finite() => Some(f.trunc() as i64),
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
/// The fraction is drawn with 16 decimal places (as many values as Python's
/// 53-bit `random()`), so its text is at most 18 characters where Python's
/// `repr` of a full-precision float often takes 19: versions, stored in every
/// checkpoint, come out no longer than Python's (17.9 characters on average
/// against 18.3), while the format and ordering stay LangGraph's.
///
/// ```
/// use checkpointer::version::{next_version, ChannelVersion};
/// let v1 = next_version(None);
/// assert!(v1.to_string().starts_with("00000000000000000000000000000001."));
/// let v8 = next_version(Some(&ChannelVersion::Int(7)));
/// assert_eq!(v8.counter(), Some(8));
/// ```
pub fn next_version(current: Option<&ChannelVersion>) -> ChannelVersion {
    with_fraction(next_counter(current), &random_fraction())
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
/// The counter has no upper bound, as Python's integers have none: past
/// 32 digits it grows longer (Python's `f"{n:032}"` does the same), and a
/// counter beyond `i64::MAX` keeps counting in decimal, never wrapping or
/// starting over.
pub fn next_version_with(current: Option<&ChannelVersion>, fraction: f64) -> ChannelVersion {
    with_fraction(next_counter(current), &crate::serde::py_float_repr(fraction))
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
/// for the negative counters an integer version can hold).
fn next_counter(current: Option<&ChannelVersion>) -> String {
    match current {
        None => "1".to_owned(),
        Some(ChannelVersion::Int(i)) => (i128::from(*i) + 1).to_string(),
        Some(ChannelVersion::Float(f)) if f.is_finite() => {
            let whole = f.trunc();
            if whole.abs() < 1e18 {
                ((whole as i64) + 1).to_string()
            } else {
                // Python's `int(f)` of a large float is exact: its decimal digits.
                increment_digits(&format!("{:.0}", whole.abs()))
            }
        }
        Some(ChannelVersion::Float(_)) => "1".to_owned(),
        Some(ChannelVersion::Str(s)) => {
            let head = s.split('.').next().unwrap_or("");
            if head.is_empty() || !head.bytes().all(|b| b.is_ascii_digit()) {
                return "1".to_owned();
            }
            increment_digits(head)
        }
    }
}

/// `digits` (ASCII decimal, leading zeros allowed) plus one, without leading
/// zeros.
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
        let mut prev = next_version(None);
        let mut total = 0;
        for _ in 0..2000 {
            let v = next_version(Some(&prev));
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
        let v1 = next_version_with(None, 0.8444218515250481);
        assert_eq!(v1.to_string(), "00000000000000000000000000000001.0.8444218515250481");
        let v2 = next_version_with(Some(&v1), 0.7579544029403025);
        assert_eq!(v2.to_string(), "00000000000000000000000000000002.0.7579544029403025");
        let v3 = next_version_with(Some(&v2), 0.420571580830845);
        assert_eq!(v3.to_string(), "00000000000000000000000000000003.0.420571580830845");
        let v8 = next_version_with(Some(&ChannelVersion::Int(7)), 0.5);
        assert_eq!(v8.to_string(), "00000000000000000000000000000008.00000000000000.5");
        let small = next_version_with(None, 1.5e-05);
        assert_eq!(small.to_string(), "00000000000000000000000000000001.0000000001.5e-05");
    }

    #[test]
    fn counters_keep_counting_past_every_integer_width() {
        let next = |v: ChannelVersion| next_version_with(Some(&v), 0.5).to_string();
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
        // Past 32 digits the counter grows longer, as Python's f"{n:032}".
        let full = "9".repeat(32);
        assert_eq!(
            head(next(ChannelVersion::from(format!("{full}.0.5")))),
            format!("1{}", "0".repeat(32))
        );
        let long = format!("1{}", "0".repeat(39));
        assert_eq!(
            head(next(ChannelVersion::from(long.as_str()))),
            format!("1{}1", "0".repeat(38))
        );
        // Versions keep ordering as strings while they keep 32 digits.
        let mut prev = ChannelVersion::from("00000000000000000000000000000098.0.5");
        for _ in 0..5 {
            let v = next_version_with(Some(&prev), 0.5);
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
            let s = next_version(None).to_string();
            let (head, frac) = s.split_once('.').unwrap();
            assert_eq!(head.len(), 32);
            assert!(frac.len() >= 16, "{s}");
            let x: f64 = frac.trim_start_matches('0').parse().unwrap_or(0.0);
            assert!((0.0..1.0).contains(&x), "{s}");
        }
    }
}
