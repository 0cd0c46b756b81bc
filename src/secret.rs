//! One mask for the secrets of every connection string: what every `Debug`,
//! `Display`, error and log line of the crate (and of its CLI and Python
//! package) shows in place of a URL, a `key=value` string or a path.
//!
//! [`redact`] masks, [`Secrets`] scrubs what a driver's message may quote.
//! Over-masking is preferred to a leak: what cannot be read as one of the
//! forms below is masked from the first place a secret could start.
//!
//! | form | masked |
//! |---|---|
//! | `scheme://user:PASSWORD@host…` (PostgreSQL, Redis, Valkey, any scheme) | the password; the user name too unless it is plain (letters, digits, `._~%!$'*+-`) and the URL reads as one |
//! | `redis://SECRET@host`, any non-PostgreSQL scheme | a lone user part (the password for some clients) |
//! | a password holding unencoded `@ / ? # :` or spaces | whole: the user info ends at the last `@` that a host follows |
//! | `?password=…`, `&sslpassword=…`, `?pass=…` (`redis+unix://`), `token`, `auth`, `secret`, `key`, `pwd`, `cred` in any case, percent-encoded | the value; the words after it without `=` (an unencoded `&` in it) |
//! | `key=value` strings (libpq) | the value of such keys, plain or quoted with escapes, unterminated quotes to the end, words after it without `=` |
//! | comma-separated cluster lists of Redis URLs | each URL |
//! | `sqlite://…?query`, `file:…?query`, paths with `?query` | the query's secret parameters |
//! | URLs that do not read (`redis://:pw`, `host:notaport`) | everything from the first character that is not a host name |

use std::fmt;

/// What a masked secret reads as.
pub const MASK: &str = "***";

/// `text` with every secret it may carry replaced by [`MASK`], for
/// messages, logs and `Debug` output. Everything else is kept as written, so
/// the result still says which server, port, database and user were meant.
///
/// ```
/// use checkpointer::secret::redact;
/// assert_eq!(redact("postgres://app:s3cret@db:5432/app"), "postgres://app:***@db:5432/app");
/// assert_eq!(redact("redis://:hunter2/x@127.0.0.1:6379/0"), "redis://:***@127.0.0.1:6379/0");
/// assert_eq!(
///     redact("postgresql://app@db/app?sslmode=require&password=s3cret"),
///     "postgresql://app@db/app?sslmode=require&password=***"
/// );
/// assert_eq!(redact("host=db user=app password='s3 cr\\'et' dbname=app"), "host=db user=app password=*** dbname=app");
/// assert_eq!(redact("redis+unix:///run/redis.sock?db=1&pass=s3cret"), "redis+unix:///run/redis.sock?db=1&pass=***");
/// assert_eq!(redact("redis://:pw"), "redis://:***");
/// ```
pub fn redact(text: &str) -> String {
    let mut out = Out::new(text);
    any(&mut out, text);
    out.shown()
}

/// The secrets of a connection string, raw and decoded (percent escapes,
/// `+` as a space, quotes and backslash escapes), to scrub from a message
/// that may quote them (a driver's error). Its `Debug` shows how many it
/// holds, never them.
///
/// ```
/// use checkpointer::secret::Secrets;
/// let secrets = Secrets::of("redis://u:p%40ss@h");
/// assert_eq!(secrets.scrub("auth failed for p@ss (p%40ss)"), "auth failed for *** (***)");
/// assert_eq!(format!("{secrets:?}"), "Secrets(2)");
/// ```
#[derive(Clone, Default)]
pub struct Secrets(Vec<String>);

impl Secrets {
    /// The secrets [`redact`] masks in `text`, each with its decoded forms.
    pub fn of(text: &str) -> Secrets {
        let mut out = Out::new(text);
        any(&mut out, text);
        let mut secrets = out.secrets();
        // longest first: a secret that holds another is replaced whole
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Secrets(secrets)
    }

    /// The secrets of every text, together.
    pub fn of_all<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> Secrets {
        let mut all: Vec<String> = texts.into_iter().flat_map(|t| Secrets::of(t.as_ref()).0).collect();
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        Secrets(all)
    }

    /// `message` with every secret replaced by [`MASK`].
    pub fn scrub(&self, message: &str) -> String {
        let mut out = message.to_owned();
        for s in &self.0 {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        out
    }

    /// Whether there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({})", self.0.len())
    }
}

/// Whether a parameter (a URL's query parameter, a `key=value` key) names a
/// credential: its name, percent-decoded, holds `pass`, `pwd`, `secret`,
/// `token`, `auth`, `key` or `cred` in any case.
///
/// ```
/// use checkpointer::secret::is_secret_name;
/// assert!(is_secret_name("sslpassword") && is_secret_name("pass%77ord") && is_secret_name("sslkey"));
/// assert!(!is_secret_name("sslmode") && !is_secret_name("keepalives") && !is_secret_name("prefix"));
/// ```
pub fn is_secret_name(name: &str) -> bool {
    let name = percent_decode(name).to_ascii_lowercase();
    ["pass", "pwd", "secret", "token", "auth", "key", "cred"]
        .iter()
        .any(|w| name.contains(w))
}

/// The spans of one text to mask, as byte ranges; every function below
/// marks spans of sub-slices of that text. Several readings of an ambiguous
/// URL mark the same text: what any of them masks is masked.
struct Out<'a> {
    text: &'a str,
    spans: Vec<(usize, usize)>,
}

impl<'a> Out<'a> {
    fn new(text: &'a str) -> Self {
        Out {
            text,
            spans: Vec::new(),
        }
    }

    /// Masks `s`, a slice of the text (nothing when it is empty).
    fn mask(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        let start = s.as_ptr() as usize - self.text.as_ptr() as usize;
        self.spans.push((start, start + s.len()));
    }

    /// The spans sorted, overlapping and touching ones joined.
    fn merged(&self) -> Vec<(usize, usize)> {
        let mut spans = self.spans.clone();
        spans.sort_unstable();
        let mut out: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (a, b) in spans {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        out
    }

    /// The text with each joined span replaced by [`MASK`].
    fn shown(&self) -> String {
        let mut shown = String::with_capacity(self.text.len());
        let mut at = 0;
        for (a, b) in self.merged() {
            shown.push_str(&self.text[at..a]);
            shown.push_str(MASK);
            at = b;
        }
        shown.push_str(&self.text[at..]);
        shown
    }

    /// Every masked text (each span and each joined span, and each of
    /// their starts up to a separator), with its decoded forms.
    fn secrets(&self) -> Vec<String> {
        let mut secrets = Vec::new();
        for &(a, b) in self.spans.iter().chain(self.merged().iter()) {
            let s = &self.text[a..b];
            let mut forms = vec![s.to_owned(), percent_decode(s), percent_decode(&s.replace('+', " "))];
            // a span masked because it does not read may run past the end
            // of the secret: each start of it up to a separator too
            for (i, _) in s.match_indices(|c: char| "/?#@&,:;".contains(c) || c.is_whitespace()) {
                forms.push(s[..i].to_owned());
                forms.push(percent_decode(&s[..i]));
            }
            if let Some(inner) = s.strip_prefix('\'') {
                forms.push(unescape(inner.strip_suffix('\'').unwrap_or(inner)));
            } else if s.contains('\\') {
                forms.push(unescape(s));
            }
            for f in forms {
                if !f.is_empty() && !secrets.contains(&f) {
                    secrets.push(f);
                }
            }
        }
        secrets
    }
}

/// What a URL's scheme says about its user info.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    /// A lone user part is a user name.
    Postgres,
    /// Redis, Valkey: comma-separated cluster lists; a lone user part is masked.
    Redis,
    /// `sqlite:`, `file:`: a path and a query, no user info.
    File,
    /// Anything else: a lone user part is masked.
    Other,
}

fn family(scheme: &str) -> Option<Family> {
    let s = scheme.to_ascii_lowercase();
    Some(match s.as_str() {
        "postgres" | "postgresql" => Family::Postgres,
        "redis" | "rediss" | "valkey" | "valkeys" | "redis+unix" | "valkey+unix" | "unix" => Family::Redis,
        "sqlite" | "file" => Family::File,
        _ => return None,
    })
}

/// A URL at the start of `text`: its family, the length of `scheme:` or
/// `scheme://`. A scheme without `//` is read only for the known families.
fn url_start(text: &str) -> Option<(Family, usize)> {
    let colon = text.find(':')?;
    let scheme = &text[..colon];
    let mut chars = scheme.chars();
    if !chars.next()?.is_ascii_alphabetic() || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let known = family(scheme);
    if text[colon + 1..].starts_with("//") {
        Some((known.unwrap_or(Family::Other), colon + 3))
    } else {
        known.map(|f| (f, colon + 1))
    }
}

/// Any text: a URL (or a list of them), else `key=value` words or a path.
fn any(out: &mut Out, text: &str) {
    let body = text.trim_start();
    match url_start(body) {
        Some((Family::Redis, start)) => {
            // a cluster list: each URL on its own
            let mut from = 0;
            for cut in cluster_cuts(body, start) {
                url(out, &body[from..cut]);
                from = cut + 1;
            }
            url(out, &body[from..]);
        }
        Some(_) => url(out, body),
        None => key_values(out, body),
    }
}

/// Where a comma starts the next Redis URL of a list.
fn cluster_cuts(text: &str, start: usize) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut from = start;
    while let Some(i) = text[from..].find(',') {
        let comma = from + i;
        let next = &text[comma + 1..];
        if matches!(url_start(next), Some((Family::Redis, n)) if next[..n].ends_with("//")) {
            cuts.push(comma);
        }
        from = comma + 1;
    }
    cuts
}

/// One URL, scheme included.
fn url(out: &mut Out, text: &str) {
    let Some((fam, start)) = url_start(text) else {
        return key_values(out, text);
    };
    let rest = &text[start..];
    if fam == Family::File {
        return path_and_query(out, rest);
    }
    let ats: Vec<usize> = rest.match_indices('@').map(|(i, _)| i).collect();
    // Each way to read the URL: no user info, or user info up to one of
    // its `@`s. Every reading after which a host follows is applied, so
    // what any of them takes for a secret is masked (`?password=a@b` reads
    // both as a query value and as user info up to the `@`).
    let mut read = false;
    for i in 0..=ats.len() {
        let tail = if i == 0 { rest } else { &rest[ats[i - 1] + 1..] };
        if let Shape::Plausible = classify(tail, fam) {
            read = true;
            if i > 0 {
                userinfo(out, &rest[..ats[i - 1]], fam, true);
            }
            path_and_query(out, tail);
        }
    }
    // No reading, or the last `@` followed by what is no host and no query
    // value: the user info (if any) may end there, and what follows is
    // shown only as far as it is a host name.
    let last_tail = ats.last().map(|&last| classify(&rest[last + 1..], fam));
    // the query's secrets as if there were no user info, even when that
    // reading fails: masked anyway, and on their own to scrub
    path_and_query(out, rest);
    if !read || matches!(last_tail, Some(Shape::Bad)) {
        match (ats.last(), last_tail) {
            // the `@` may sit in a query value no reading holds: what
            // follows it is masked whole
            (Some(&last), Some(Shape::QueryTail)) => {
                userinfo(out, &rest[..last], fam, false);
                out.mask(&rest[last + 1..]);
                // its secrets on their own, to scrub
                query_params(out, &rest[last + 1..]);
            }
            (Some(&last), _) => {
                userinfo(out, &rest[..last], fam, false);
                tail_unparsed(out, &rest[last + 1..]);
            }
            (None, _) => tail_unparsed(out, rest),
        }
    }
}

/// The user info of a URL, without its `@`.
fn userinfo(out: &mut Out, info: &str, fam: Family, parsed: bool) {
    let plain = |user: &str| parsed && user.chars().all(is_user_char);
    match info.split_once(':') {
        Some((user, password)) => {
            if !plain(user) {
                out.mask(user);
            }
            out.mask(password);
        }
        None if fam == Family::Postgres && plain(info) => {}
        None => out.mask(info),
    }
}

fn is_user_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '%' | '!' | '$' | '\'' | '*' | '+' | '-')
}

fn is_host_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '%' | '-')
}

/// How the text after a candidate `@` (or after `scheme://`) reads.
enum Shape {
    /// `host[:port][,host[:port]…][/path][?query]`.
    Plausible,
    /// The host part holds `&` or `=`: the rest of a query value.
    QueryTail,
    /// Anything else.
    Bad,
}

fn classify(tail: &str, fam: Family) -> Shape {
    let hosts_end = tail.find(['/', '?', '#']).unwrap_or(tail.len());
    let hosts = &tail[..hosts_end];
    if hosts.contains(['&', '=']) {
        return Shape::QueryTail;
    }
    // one host, or (PostgreSQL only) a list of them, none empty
    let list = hosts.contains(',');
    if (list && fam != Family::Postgres)
        || !hosts
            .split(',')
            .all(|h| host_and_port(h) && !(list && (h.is_empty() || h.starts_with(':'))))
    {
        return Shape::Bad;
    }
    let after = &tail[hosts_end..];
    let (path, query) = after.split_once('?').unwrap_or((after, ""));
    if path.contains(|c: char| c == '@' || c.is_whitespace()) {
        return Shape::Bad;
    }
    // an `@` in the query sits in a `key=value` parameter's value
    let ats_in_values = query
        .split('&')
        .all(|p| p.find('@').is_none_or(|at| p[..at].contains('=')));
    if ats_in_values {
        Shape::Plausible
    } else {
        Shape::Bad
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`; empty parts are allowed.
fn host_and_port(s: &str) -> bool {
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return false;
        };
        if !addr
            .chars()
            .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.' | '%'))
        {
            return false;
        }
        match after.strip_prefix(':') {
            Some(port) => ("", port),
            None if after.is_empty() => ("", ""),
            None => return false,
        }
    } else {
        s.split_once(':').unwrap_or((s, ""))
    };
    let port_ok = match s.rfind(':') {
        // `host:` without a port reads as one only in some parsers
        Some(i) if !s.starts_with('[') || s[i - 1..].starts_with("]:") => !port.is_empty(),
        _ => true,
    };
    host.chars().all(is_host_char) && port.chars().all(|c| c.is_ascii_digit()) && port_ok
}

/// What follows in a URL that does not read: shown as far as it is a host
/// name, masked from there.
fn tail_unparsed(out: &mut Out, tail: &str) {
    // the query's secrets on their own, to scrub
    path_and_query(out, tail);
    let host_end = tail.find(|c: char| !is_host_char(c)).unwrap_or(tail.len());
    let rest = &tail[host_end..];
    let Some(sep) = rest.chars().next() else { return };
    if matches!(sep, ':' | '/' | '?' | '#' | ',') {
        out.mask(&rest[1..]);
    } else {
        out.mask(rest);
    }
}

/// `path[?query]`: the path as written, the query's secrets masked.
fn path_and_query(out: &mut Out, text: &str) {
    if let Some((_, query)) = text.split_once('?') {
        query_params(out, query);
    }
}

/// A query's `&`-separated parameters, the values of secret ones masked,
/// and the pieces without `=` after one (a secret holding an unencoded
/// `&`). Returns whether the last parameter was a secret.
fn query_params(out: &mut Out, query: &str) -> bool {
    let mut after_secret = false;
    for param in query.split('&') {
        match param.split_once('=') {
            Some((key, value)) => {
                after_secret = is_secret_name(key);
                if after_secret {
                    out.mask(value);
                }
            }
            None if after_secret => out.mask(param),
            None => {}
        }
    }
    after_secret
}

/// A `key=value` connection string, tokenized as `tokio_postgres` (and
/// libpq) do, or a path.
fn key_values(out: &mut Out, text: &str) {
    let b = text.as_bytes();
    let mut i = 0;
    let mut after_secret = false;
    let ws = |c: u8| c.is_ascii_whitespace();
    while i < b.len() {
        // whitespace is kept
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let key_start = i;
        let word_end = text[i..]
            .find(|c: char| c.is_ascii_whitespace())
            .map_or(b.len(), |e| i + e);
        if !after_secret && matches!(url_start(&text[i..word_end]), Some((_, n)) if text[i..i + n].ends_with("//")) {
            // a URL among the words: `x postgres://u:pw@h/db?sslmode=require`
            url(out, &text[i..word_end]);
            i = word_end;
            continue;
        }
        while i < b.len() && !ws(b[i]) && b[i] != b'=' {
            i += 1;
        }
        let key = &text[key_start..i];
        let mut j = i;
        while j < b.len() && ws(b[j]) {
            j += 1;
        }
        if j == b.len() || b[j] != b'=' || key.is_empty() {
            // a word without `=`
            if key.is_empty() {
                // a stray `=`: keep it, go on after it
                i += 1;
            } else if after_secret {
                // part of an unquoted secret with spaces
                out.mask(key);
            } else if url_start(key).is_some() {
                url(out, key);
            } else {
                path_and_query(out, key);
            }
            continue;
        }
        // key, spaces, `=`, spaces
        j += 1;
        while j < b.len() && ws(b[j]) {
            j += 1;
        }
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
        if let Some((path, _)) = key.split_once('?') {
            // a path with a query: `/data/x.sqlite?mode=ro&password=…`
            after_secret = query_params(out, &text[key_start + path.len() + 1..j]);
        } else {
            after_secret = is_secret_name(key);
            if after_secret {
                out.mask(value);
            } else if value.contains("://") {
                any(out, value);
            }
        }
        i = j;
    }
}

/// `%XX` escapes decoded (malformed ones kept), invalid UTF-8 replaced.
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

/// Backslash escapes of a libpq value resolved.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    const SECRETS: &[&str] = &["s3cret", "hunter2", "p@ss", "SECRET"];

    #[track_caller]
    fn masked(input: &str, expected: &str) {
        let got = redact(input);
        assert_eq!(got, expected, "{input}");
        for s in SECRETS {
            assert!(!got.contains(s), "{s} in {got}");
        }
    }

    // The PostgreSQL forms (formerly `postgres::redact_connection_string`).

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

    #[cfg(feature = "postgres")]
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

    // The Redis forms (formerly `redis::redact_url` and the CLI's copy).

    #[test]
    fn redis_urls() {
        masked("redis://u:p%40ss@h:6379/0", "redis://u:***@h:6379/0");
        masked("redis://:hunter2@h", "redis://:***@h");
        masked("rediss://hunter2@h/1", "rediss://***@h/1");
        masked("redis://secret@h/0", "redis://***@h/0");
        masked("redis://h:6379", "redis://h:6379");
        masked(
            "redis://:s3cret@127.0.0.1:6379/0?prefix=p",
            "redis://:***@127.0.0.1:6379/0?prefix=p",
        );
        masked("rediss://:s3cret@h?ca=ca.pem", "rediss://:***@h?ca=ca.pem");
        // unencoded `/`, `#`, `?` in the password
        masked("redis://:hunter2/x@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0");
        masked("redis://:hunter2#x@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0");
        masked("redis://:hun?ter2@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0");
        masked("redis://u:a@b?c@h/0", "redis://u:***@h/0");
        // the query's credentials, unix sockets' `pass`
        masked("redis://h/0?password=hunter2", "redis://h/0?password=***");
        masked(
            "redis+unix:///run/redis.sock?db=1&pass=hunter2&user=u",
            "redis+unix:///run/redis.sock?db=1&pass=***&user=u",
        );
        masked("unix:///run/redis.sock?pass=hunter2", "unix:///run/redis.sock?pass=***");
        masked("valkey://:hunter2@h", "valkey://:***@h");
        // cluster lists
        masked(
            "redis://:hunter2@h1:7000,redis://u:s3cret@h2:7001,rediss://p@ss@h3",
            "redis://:***@h1:7000,redis://u:***@h2:7001,rediss://***@h3",
        );
    }

    #[test]
    fn what_does_not_parse_is_masked() {
        masked("redis://:s3cret@127.0.0.1:notaport/0", "redis://:***@127.0.0.1:***");
        masked("redis://:hunter2", "redis://:***");
        masked("redis://h:hunter2", "redis://h:***");
        masked("postgres://u:s3cret@h:port/db", "postgres://***:***@h:***");
        masked("postgres://u:a@b=SECRET", "postgres://***:***@***");
        masked("redis://u:a@b!SECRET", "redis://***:***@b***");
        masked("redis:hunter2@h", "redis:***@h");
        masked("  postgres://u:s3cret@h/db", "  postgres://u:***@h/db");
        masked("x postgres://u:s3cret@h/db", "x postgres://u:***@h/db");
        masked("mysql://u:s3cret@h/db", "mysql://u:***@h/db");
        masked("mysql://SECRET@h/db", "mysql://***@h/db");
        // read both ways (a query value, user info up to the `@`): masked
        // as either reading masks it
        masked("postgres://h/db?password=s3cret@SECRET", "postgres://***");
        masked("redis://u:a@b?c=d@h:bad", "redis://***:***@h:***");
    }

    #[test]
    fn paths_with_queries() {
        masked("sqlite:///data/x.sqlite", "sqlite:///data/x.sqlite");
        masked(
            "sqlite:///data/x.sqlite?mode=ro&key=s3cret",
            "sqlite:///data/x.sqlite?mode=ro&key=***",
        );
        masked("file:x.db?password=s3cret", "file:x.db?password=***");
        masked("/data/x.db?mode=ro&password=s3cret", "/data/x.db?mode=ro&password=***");
        masked("/data/x.db?password=s3cret SECRET", "/data/x.db?password=*** ***");
        masked("/data/x.db", "/data/x.db");
        masked("data dir/x y.sqlite", "data dir/x y.sqlite");
    }

    #[test]
    fn secrets_are_raw_and_decoded() {
        use super::Secrets;
        let s = Secrets::of("redis://u:p%40ss@h");
        assert_eq!(s.scrub("x p@ss y p%40ss"), "x *** y ***");
        let s = Secrets::of(r"host=h password='a b\' c'");
        assert_eq!(s.scrub("saw a b' c"), "saw ***");
        let s = Secrets::of("redis+unix:///s?pass=a+b");
        assert_eq!(s.scrub("a b"), "***");
        assert!(Secrets::of("redis://h/0").is_empty());
    }
}
