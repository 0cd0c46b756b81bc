//! Python's `repr(float)`, used for version fractions and JSON metadata.

/// Formats `x` exactly as Python's `repr(x)` does: the shortest digits that
/// round-trip, fixed notation for decimal exponents in `-4..16` (always with a
/// fractional part, `1.0`), otherwise scientific with a signed two-digit
/// exponent (`1.5e-05`, `1e+16`); `inf`, `-inf` and `nan`.
///
/// ```
/// use checkpointer::serde::py_float_repr;
/// assert_eq!(py_float_repr(0.1), "0.1");
/// assert_eq!(py_float_repr(1.0), "1.0");
/// assert_eq!(py_float_repr(1.5e-05), "1.5e-05");
/// assert_eq!(py_float_repr(1e16), "1e+16");
/// ```
pub fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digit count; when two
    // candidates of that length are equally close it may pick the upper one,
    // where Python rounds the exact value half-to-even. Formatting again with
    // that many digits of explicit precision rounds the exact value like Python.
    let shortest = format!("{:e}", x.abs());
    let ndigits = shortest
        .split('e')
        .next()
        .map_or(1, |m| m.chars().filter(char::is_ascii_digit).count());
    let sci = format!("{:.*e}", ndigits.saturating_sub(1), x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = match digits.trim_end_matches('0') {
        "" => "0",
        trimmed => trimmed,
    };
    let sign = if x < 0.0 { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp < 0 {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        } else if exp + 1 >= n {
            format!("{}{}.0", digits, "0".repeat((exp + 1 - n) as usize))
        } else {
            let (int, frac) = digits.split_at((exp + 1) as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let mant = if rest.is_empty() {
            first.to_owned()
        } else {
            format!("{first}.{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mant}e{esign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::py_float_repr;

    #[test]
    fn matches_python() {
        let cases: &[(f64, &str)] = &[
            (0.8444218515250481, "0.8444218515250481"),
            (0.420571580830845, "0.420571580830845"),
            (0.5, "0.5"),
            (1.5e-05, "1.5e-05"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123.456, "123.456"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e20, "1.2345e+20"),
            (-2.5, "-2.5"),
            (3.0, "3.0"),
            (1e-300, "1e-300"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (0.1 + 0.2, "0.30000000000000004"),
            // a tie between two shortest candidates: Python keeps the even digit
            (920429421271961.2, "920429421271961.2"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(*x), *want, "{x:e}");
        }
    }
}
