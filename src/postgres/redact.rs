//! Masking the secrets of a connection string for messages.

/// What a masked secret reads as.
const MASK: &str = "***";

/// `text` with every password it carries replaced by `***`, for error
/// messages, logs and `Debug` output. Everything else is kept as written, so
/// the result still says which server, port, database and user were meant.
///
/// Masked, in both forms `tokio_postgres::Config` parses:
///
/// * URLs (`postgres://`, `postgresql://`, or any other `scheme://`): the
///   password of the user info (`user:password@`; up to the last `@` before
///   the query, so a password holding an unencoded `@` is masked whole), and
///   the value of every query parameter whose name contains `pass`, compared
///   without regard to case and after percent-decoding (`password`,
///   `PassWord`, `pass%77ord`, `sslpassword`, `passfile`), wherever it
///   appears and however often; a parameter without `=` right after one
///   (a password holding an unencoded `&`) is masked too.
/// * `key=value` strings: the value of every key whose name contains `pass`
///   (any case), plain or single-quoted with backslash escapes
///   (`password = 'a b\' c'`), an unterminated quoted value up to the end,
///   and words without `=` right after one (a password with unquoted
///   spaces). A value holding a URL (libpq reads `dbname=postgres://…`) is
///   masked as a URL.
///
/// Over-masking is preferred to a leak: text that cannot be parsed is masked
/// from the first place a password could start.
///
/// ```
/// use checkpointer::postgres::redact_connection_string as redact;
/// assert_eq!(redact("postgres://app:s3cret@db:5432/app"), "postgres://app:***@db:5432/app");
/// assert_eq!(
///     redact("postgresql://app@db/app?sslmode=require&password=s3cret"),
///     "postgresql://app@db/app?sslmode=require&password=***"
/// );
/// assert_eq!(
///     redact("host=db user=app password='s3 cr\\'et' dbname=app"),
///     "host=db user=app password=*** dbname=app"
/// );
/// assert_eq!(redact("postgres://app@db/app"), "postgres://app@db/app");
/// ```
pub fn redact_connection_string(text: &str) -> String {
    if let Some(at) = text.find("://") {
        let scheme = &text[..at];
        if !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            return redact_url(text, at + 3);
        }
    }
    redact_key_values(text)
}

/// Whether a parameter name carries a secret.
fn is_secret_key(raw: &str) -> bool {
    percent_decode(raw).to_ascii_lowercase().contains("pass")
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` is a URL whose user info starts at byte `start`.
fn redact_url(text: &str, start: usize) -> String {
    let rest = &text[start..];
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..start]);
    // The user info ends at the first `@` (as `tokio_postgres` reads it); a
    // password may hold `@` itself, so it is masked up to the last `@`
    // before the query that follows.
    let mut from = 0;
    if let Some(first_at) = rest.find('@') {
        if let Some(colon) = rest[..first_at].find(':') {
            let query = rest[first_at..].find('?').map_or(rest.len(), |q| first_at + q);
            let last_at = rest[..query].rfind('@').unwrap_or(first_at);
            out.push_str(&rest[..=colon]);
            if last_at > colon + 1 {
                out.push_str(MASK);
            }
            from = last_at;
        }
    }
    let rest = &rest[from..];
    let Some((path, params)) = rest.split_once('?') else {
        out.push_str(rest);
        return out;
    };
    out.push_str(path);
    out.push('?');
    let mut after_secret = false;
    for (i, param) in params.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match param.split_once('=') {
            Some((key, value)) if is_secret_key(key) => {
                out.push_str(key);
                out.push('=');
                if !value.is_empty() {
                    out.push_str(MASK);
                }
                after_secret = true;
            }
            Some(_) => {
                out.push_str(param);
                after_secret = false;
            }
            // a password holding an unencoded `&`
            None if after_secret && !param.is_empty() => out.push_str(MASK),
            None => out.push_str(param),
        }
    }
    out
}

/// A `key=value` connection string, tokenized as `tokio_postgres` (and
/// libpq) do.
fn redact_key_values(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut after_secret = false;
    let ws = |c: u8| c.is_ascii_whitespace();
    while i < b.len() {
        // whitespace is kept
        let start = i;
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        out.push_str(&text[start..i]);
        if i == b.len() {
            break;
        }
        let key_start = i;
        while i < b.len() && !ws(b[i]) && b[i] != b'=' {
            i += 1;
        }
        let key = &text[key_start..i];
        let mut j = i;
        while j < b.len() && ws(b[j]) {
            j += 1;
        }
        if j == b.len() || b[j] != b'=' || key.is_empty() {
            // A word without `=`: part of an unquoted password after one.
            if key.is_empty() {
                // a stray `=`: keep it, go on after it
                out.push('=');
                i += 1;
            } else if after_secret {
                out.push_str(MASK);
            } else {
                out.push_str(key);
            }
            continue;
        }
        // key, spaces, `=`, spaces
        j += 1;
        while j < b.len() && ws(b[j]) {
            j += 1;
        }
        out.push_str(&text[key_start..j]);
        let value_start = j;
        if j < b.len() && b[j] == b'\'' {
            j += 1;
            while j < b.len() && b[j] != b'\'' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            j = (j + 1).min(b.len());
        } else {
            while j < b.len() && !ws(b[j]) {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            j = j.min(b.len());
        }
        // `j` may sit inside a multi-byte character after a backslash:
        // move to the next boundary.
        while j < b.len() && !text.is_char_boundary(j) {
            j += 1;
        }
        let value = &text[value_start..j];
        after_secret = is_secret_key(key);
        if after_secret {
            if !value.is_empty() {
                out.push_str(MASK);
            }
        } else if value.contains("://") {
            out.push_str(&redact_connection_string(value));
        } else {
            out.push_str(value);
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact_connection_string as redact;

    const SECRETS: &[&str] = &["s3cret", "hunter2", "p@ss", "SECRET"];

    #[track_caller]
    fn masked(input: &str, expected: &str) {
        let got = redact(input);
        assert_eq!(got, expected, "{input}");
        for s in SECRETS {
            assert!(!got.contains(s), "{s} in {got}");
        }
    }

    #[test]
    fn url_userinfo() {
        masked("postgres://u:s3cret@h:5432/db", "postgres://u:***@h:5432/db");
        masked("postgresql://u:s3cret@h/db", "postgresql://u:***@h/db");
        masked("postgresql://u:s3%40cret@h/db", "postgresql://u:***@h/db");
        masked("postgresql://u:p@ss@h/db?x=1", "postgresql://u:***@h/db?x=1");
        masked("postgresql://u:hun:ter2:hunter2@h/db", "postgresql://u:***@h/db");
        masked("postgresql://:s3cret@h/db", "postgresql://:***@h/db");
        masked("postgresql://u:@h/db", "postgresql://u:@h/db");
        masked("POSTGRES://u:s3cret@h/db", "POSTGRES://u:***@h/db");
        masked("postgres://u@h:5432/db", "postgres://u@h:5432/db");
        masked("postgres://h/db", "postgres://h/db");
        masked(
            "postgresql://u:pa?ss@h/db?password=s3cret",
            "postgresql://u:***@h/db?password=***",
        );
        masked(
            "postgresql://h/db?user=me@x.org&password=s3cret",
            "postgresql://h/db?user=me@x.org&password=***",
        );
        masked("postgres://h:5432,h2:5433/db", "postgres://h:5432,h2:5433/db");
    }

    #[test]
    fn url_query_passwords() {
        masked(
            "postgresql://u@h/db?password=s3cret",
            "postgresql://u@h/db?password=***",
        );
        masked(
            "postgresql://u@h/db?sslmode=disable&password=s3cret&application_name=x",
            "postgresql://u@h/db?sslmode=disable&password=***&application_name=x",
        );
        masked(
            "postgresql://h/db?PassWord=s3cret&password=hunter2",
            "postgresql://h/db?PassWord=***&password=***",
        );
        masked(
            "postgresql://h/db?pass%77ord=s3cret",
            "postgresql://h/db?pass%77ord=***",
        );
        masked("postgresql://h/db?password=s3%63ret", "postgresql://h/db?password=***");
        masked(
            "postgresql://h/db?sslpassword=s3cret",
            "postgresql://h/db?sslpassword=***",
        );
        masked("postgresql://h/db?passfile=/s3cret", "postgresql://h/db?passfile=***");
        // an unencoded `&` inside the password
        masked(
            "postgresql://h/db?password=hun&ter2&x=1",
            "postgresql://h/db?password=***&***&x=1",
        );
        // both carriers at once, and an `@` in the query
        masked(
            "postgresql://u:s3cret@h/db?user=me@example.org&password=hunter2",
            "postgresql://u:***@h/db?user=me@example.org&password=***",
        );
        masked("postgresql://h/db?password=", "postgresql://h/db?password=");
        masked("postgresql://h/db?sslmode=require", "postgresql://h/db?sslmode=require");
    }

    #[test]
    fn key_value_strings() {
        masked("host=h password=s3cret dbname=db", "host=h password=*** dbname=db");
        masked("password=s3cret", "password=***");
        masked("host=h password = 's3cret' port=1", "host=h password = *** port=1");
        masked(r"password='a b\' SECRET' user=u", "password=*** user=u");
        masked(r"password=s3\ cret user=u", "password=*** user=u");
        masked("PASSWORD=s3cret Password=hunter2", "PASSWORD=*** Password=***");
        masked("host=h sslpassword=s3cret", "host=h sslpassword=***");
        masked("host=h password='s3cret unterminated", "host=h password=***");
        // unquoted spaces: the words after the password are masked too
        masked("password=hunter2 SECRET s3cret", "password=*** *** ***");
        masked("host=h oops password=s3cret", "host=h oops password=***");
        masked("dbname=postgres://u:s3cret@h/db", "dbname=postgres://u:***@h/db");
        masked("host=h  user=u\tport=5", "host=h  user=u\tport=5");
        masked("password=", "password=");
        masked("=x password=hunter2", "=x password=***");
        masked("password=ü\\é SECRET", "password=*** ***");
        masked("", "");
        masked("nope", "nope");
    }

    #[test]
    fn every_form_tokio_postgres_reads_loses_its_password() {
        use tokio_postgres::Config;
        for text in [
            "postgres://u:s3cret@h/db",
            "postgresql://u@h/db?password=s3cret",
            "postgresql://u@h/db?password=s3%63ret",
            "host=h password=s3cret",
            "host=h password='s3 cret'",
            r"host=h password='s3\'cret'",
        ] {
            let config: Config = text.parse().unwrap();
            let password = String::from_utf8(config.get_password().unwrap().to_vec()).unwrap();
            let shown = redact(text);
            assert!(!shown.contains(&password), "{password} in {shown}");
            assert!(!shown.contains("s3"), "{shown}");
        }
    }
}
