//! No password reaches a `Debug`, a `Display` or an error chain, in any
//! connection-string form of any backend, valid or unparsable (`docs/reliability.md`,
//! H04): the failures reported, then a property over
//! generated strings of every scheme. The CLI's side is
//! `cli/tests/cli/errors.rs`.

use crate::harness;

use checkpointer::postgres::PostgresSaver;
use checkpointer::redis::RedisSaver;
use checkpointer::sqlite::SqliteSaverBuilder;
use checkpointer::{CheckpointConfig, CheckpointSaver, Error};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// The error, its `Debug` and every `source()` below it, as text.
fn chain(e: &Error) -> String {
    let mut text = format!("{e}\n{e:?}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!("\n{s}\n{s:?}"));
        source = s.source();
    }
    text
}

#[track_caller]
fn hidden(what: &str, text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            !needle.is_empty() && !text.contains(needle),
            "{what}: {needle:?} in {text}"
        );
    }
}

/// Passwords with unencoded reserved characters: the URL does not parse
/// (or reads another host), and was printed whole.
const RESERVED: &[&str] = &[
    "SECRET/pw",
    "SECRET#pw",
    "SECRET?pw",
    "SE@CRET/pw",
    "SECRET pw",
    "SE:CRET/x",
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn redis_builder_debug_hides_passwords_with_reserved_characters() {
    for pw in RESERVED {
        for url in [
            format!("redis://:{pw}@127.0.0.1:1/0"),
            format!("redis://app:{pw}@127.0.0.1:1/0"),
            format!("rediss://{pw}@127.0.0.1:1"),
        ] {
            let builder = RedisSaver::builder().url(url.clone());
            hidden(&url, &format!("{builder:?}"), &["SECRET", "CRET", pw]);
            let builder = RedisSaver::builder().cluster([url.clone(), "redis://127.0.0.1:2".to_owned()]);
            hidden(&url, &format!("{builder:?}"), &["SECRET", "CRET", pw]);
        }
    }
}

fn redis_unix_pass_is_masked_in_debug() {
    for url in [
        "redis+unix:///tmp/checkpointer-none.sock?db=1&pass=SECRETpw",
        "unix:///tmp/checkpointer-none.sock?pass=SECRETpw&db=2",
    ] {
        let builder = RedisSaver::builder().url(url);
        hidden(url, &format!("{builder:?}"), &["SECRET"]);
        let e = runtime().block_on(RedisSaver::open(url)).unwrap_err();
        hidden(url, &chain(&e), &["SECRET"]);
    }
}

fn redis_open_errors_hide_passwords_with_reserved_characters() {
    let rt = runtime();
    for pw in RESERVED {
        for url in [
            format!("redis://:{pw}@127.0.0.1:1/0"),
            format!("redis://app:{pw}@127.0.0.1:1/0"),
        ] {
            let e = rt.block_on(RedisSaver::builder().url(url.clone()).open()).unwrap_err();
            hidden(&url, &chain(&e), &["SECRET", "CRET", pw]);
            let e = rt
                .block_on(RedisSaver::builder().cluster([url.clone()]).open())
                .unwrap_err();
            hidden(&url, &chain(&e), &["SECRET", "CRET", pw]);
        }
    }
}

/// `redis://host/0?password=…` was silently ignored (the `redis` client reads
/// no password from a TCP URL's query) and echoed: refused, typed, masked.
fn redis_query_credentials_are_refused() {
    let rt = runtime();
    for url in [
        "redis://127.0.0.1:1/0?password=SECRETpw",
        "redis://127.0.0.1:1/0?protocol=resp3&PassWord=SECRETpw",
        "rediss://127.0.0.1:1/0?token=SECRETpw",
        "redis://127.0.0.1:1?auth=SECRETpw",
        "redis+unix:///tmp/checkpointer-none.sock?password=SECRETpw",
    ] {
        let e = rt.block_on(RedisSaver::open(url)).unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{url}: {e:?}");
        assert!(e.to_string().contains("credential"), "{url}: {e}");
        hidden(url, &chain(&e), &["SECRET"]);
        let e = checkpointer::redis::check_url(url).unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{url}: {e:?}");
    }
    // a unix socket's `pass` is the client's own parameter: read, not refused
    let e = rt
        .block_on(RedisSaver::open(
            "redis+unix:///tmp/checkpointer-none.sock?pass=SECRETpw",
        ))
        .unwrap_err();
    assert!(matches!(e, Error::Storage { .. }), "{e:?}");
    assert!(checkpointer::redis::check_url("redis+unix:///tmp/checkpointer-none.sock?pass=x").is_ok());
}

fn sqlite_builder_debug_masks_query_secrets() {
    for path in [
        "/tmp/x.sqlite?mode=ro&key=SECRETpw",
        "file:/tmp/x.sqlite?password=SECRETpw",
    ] {
        hidden(path, &format!("{:?}", SqliteSaverBuilder::new(path)), &["SECRET"]);
    }
    let builder = SqliteSaverBuilder::new("/tmp/plain dir/x.sqlite");
    assert!(
        format!("{builder:?}").contains("/tmp/plain dir/x.sqlite"),
        "{builder:?}"
    );
}

// ---- the property ----------------------------------------------------------

/// A generated connection string: the text, the password as meant, the
/// password as written in the text, and the letters-only core of the
/// password (which no message may show).
#[derive(Debug, Clone)]
struct Case {
    text: String,
    kind: Kind,
    password: String,
    written: String,
    core: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Postgres,
    Redis,
    RedisCluster,
    Sqlite,
}

/// Any printable ASCII character, and a few others.
fn any_char() -> impl Strategy<Value = char> {
    prop_oneof![
        8 => (0x20u8..0x7f).prop_map(char::from),
        1 => prop::sample::select(vec!['é', 'ü', '€', '\u{3000}', '日']),
    ]
}

/// A password: any characters around a core of 4–8 capital letters (no hex
/// digit among them, so a percent escape never forms it).
fn password() -> impl Strategy<Value = (String, String)> {
    (
        prop::collection::vec(any_char(), 0..6),
        "[G-Z]{4,8}",
        prop::collection::vec(any_char(), 0..6),
    )
        .prop_map(|(a, core, b)| {
            let pw = format!(
                "{}{core}{}",
                a.into_iter().collect::<String>(),
                b.into_iter().collect::<String>()
            );
            (pw, core)
        })
}

/// `s` percent-encoded: every byte but the unreserved ones (`all`), or only
/// the bytes in `set`, with capital or small hex digits.
fn encode(s: &str, all: bool, set: &str, upper: bool) -> String {
    let mut out = String::new();
    for ch in s.chars() {
        let unreserved = ch.is_ascii_alphanumeric() || "-._~".contains(ch);
        if (all && !unreserved) || set.contains(ch) || !ch.is_ascii() {
            let mut buf = [0u8; 4];
            for b in ch.encode_utf8(&mut buf).bytes() {
                out.push_str(&if upper {
                    format!("%{b:02X}")
                } else {
                    format!("%{b:02x}")
                });
            }
        } else {
            out.push(ch);
        }
    }
    out
}

/// How the password is written in a URL's user info.
#[derive(Debug, Clone, Copy)]
enum Written {
    Raw,
    Reserved,
    All,
}

fn written(pw: &str, how: Written, upper: bool) -> String {
    match how {
        Written::Raw => pw.to_owned(),
        Written::Reserved => encode(pw, false, "@/?#:%&, ", upper),
        Written::All => encode(pw, true, "", upper),
    }
}

/// The libpq quoting of a `key=value` value.
fn quoted(pw: &str) -> String {
    format!("'{}'", pw.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// How a valid URL is spoiled.
#[derive(Debug, Clone, Copy)]
enum Spoil {
    None,
    BadPort,
    BadHost,
    NoHost,
    EmptyHost,
}

fn case() -> impl Strategy<Value = Case> {
    (
        password(),
        0usize..17,
        prop_oneof![Just(Written::Raw), Just(Written::Reserved), Just(Written::All)],
        any::<bool>(),
        prop_oneof![
            4 => Just(Spoil::None),
            1 => Just(Spoil::BadPort),
            1 => Just(Spoil::BadHost),
            1 => Just(Spoil::NoHost),
            1 => Just(Spoil::EmptyHost)
        ],
        "[a-z]{0,5}",
    )
        .prop_map(|((pw, core), form, how, upper, spoil, user)| {
            // without a host, an unencoded password is another valid URL
            // (`redis://u:12/AB` is host `u`, port 12, path `/AB`), and a
            // lone user part without one is a host
            let how = match (spoil, how) {
                (Spoil::NoHost, Written::Raw) => Written::Reserved,
                _ => how,
            };
            let spoil = match (form, spoil) {
                (7, Spoil::NoHost) => Spoil::None,
                _ => spoil,
            };
            let w = written(&pw, how, upper);
            // a query value: `&` and `#` (and spaces in a bare path) must be
            // escaped there, or they end it by every reader's rules
            let q = encode(&pw, false, "&#%+ ", upper);
            let host = match spoil {
                Spoil::None => "127.0.0.1:1",
                Spoil::BadPort => "127.0.0.1:notaport",
                Spoil::BadHost => "127.0.0!x:1",
                Spoil::NoHost | Spoil::EmptyHost => "",
            };
            // the user info and the host, joined as the spoiling says
            let at = |info: &str| match spoil {
                Spoil::NoHost => info.to_owned(),
                _ => format!("{info}@{host}"),
            };
            let lone = w.replace(':', "%3A");
            let (kind, text, written) = match form {
                0 => (
                    Kind::Postgres,
                    format!("postgresql://{}/db", at(&format!("{user}:{w}"))),
                    w,
                ),
                1 => (
                    Kind::Postgres,
                    format!(
                        "postgres://{}/db?sslmode=disable&connect_timeout=2",
                        at(&format!("{user}:{w}"))
                    ),
                    w,
                ),
                2 => (
                    Kind::Postgres,
                    format!("postgresql://{user}@{host}/db?sslmode=disable&password={q}&connect_timeout=2"),
                    q,
                ),
                3 => (
                    Kind::Postgres,
                    format!(
                        "host=127.0.0.1 port=1 user=u password={} dbname=db connect_timeout=2",
                        quoted(&pw)
                    ),
                    quoted(&pw),
                ),
                4 => (
                    Kind::Postgres,
                    format!("host=127.0.0.1 password = {} port=1", quoted(&pw)),
                    quoted(&pw),
                ),
                5 => (Kind::Redis, format!("redis://{}/0", at(&format!("{user}:{w}"))), w),
                6 => (Kind::Redis, format!("rediss://{}", at(&format!(":{w}"))), w),
                7 => (Kind::Redis, format!("redis://{}/2", at(&lone)), lone),
                8 => (Kind::Redis, format!("valkey://{}/0", at(&format!("{user}:{w}"))), w),
                9 => (
                    Kind::Redis,
                    format!("redis+unix:///tmp/checkpointer-none.sock?db=1&pass={q}"),
                    q,
                ),
                10 => (Kind::Redis, format!("unix:///tmp/checkpointer-none.sock?pass={q}"), q),
                11 => (Kind::Redis, format!("redis://{host}/0?password={q}"), q),
                12 => (
                    Kind::RedisCluster,
                    format!("redis://{},redis://{user}:{w}@127.0.0.1:2", at(&format!(":{w}"))),
                    w,
                ),
                13 => (Kind::Sqlite, format!("sqlite:///tmp/x.sqlite?mode=ro&key={q}"), q),
                14 => (Kind::Sqlite, format!("file:/tmp/x.db?password={q}"), q),
                15 => (Kind::Sqlite, format!("/tmp/x.db?mode=ro&password={q}"), q),
                _ => (
                    Kind::Postgres,
                    format!("postgresql://{},127.0.0.1:2/db", at(&format!("{user}:{w}"))),
                    w,
                ),
            };
            Case {
                text,
                kind,
                password: pw,
                written,
                core,
            }
        })
}

/// The forms of the password that must not be shown.
fn needles(c: &Case) -> Vec<String> {
    let mut out = vec![c.core.clone(), c.password.clone(), c.written.clone()];
    let decoded = percent_decode(&c.written);
    out.push(decoded);
    out.retain(|n| n.chars().count() >= 3 && n != "***");
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[track_caller]
fn none_shown(c: &Case, what: &str, text: &str) -> Result<(), TestCaseError> {
    for n in needles(c) {
        prop_assert!(!text.contains(&n), "{what} of {:?} shows {n:?}: {text}", c.text);
    }
    Ok(())
}

/// The mask, the scrubber and every builder's `Debug`: no I/O.
fn check_shown(c: &Case) -> Result<(), TestCaseError> {
    // the mask: nothing of the password; the rest of every generated string
    // is in small letters, so any capital shown is the password's
    let shown = checkpointer::secret::redact(&c.text);
    prop_assert!(
        !shown.chars().any(|ch| ch.is_ascii_uppercase()),
        "redact({:?}) = {shown}",
        c.text
    );
    none_shown(c, "redact", &shown)?;
    let secrets = checkpointer::secret::Secrets::of(&c.text);
    let quoted = format!("x {} y {} z {}", c.password, c.written, percent_decode(&c.written));
    none_shown(c, "Secrets::scrub", &secrets.scrub(&quoted))?;
    none_shown(c, "Secrets Debug", &format!("{secrets:?}"))?;
    match c.kind {
        Kind::Postgres => {
            let builder = PostgresSaver::builder().url(c.text.clone());
            none_shown(c, "builder Debug", &format!("{builder:?}"))?;
            if let Err(e) = checkpointer::postgres::parse_connection_string(&c.text) {
                none_shown(c, "parse error", &chain(&e))?;
            }
        }
        Kind::Redis => {
            none_shown(
                c,
                "builder Debug",
                &format!("{:?}", RedisSaver::builder().url(c.text.clone())),
            )?;
            if let Err(e) = checkpointer::redis::check_url(&c.text) {
                none_shown(c, "check_url error", &chain(&e))?;
            }
        }
        Kind::RedisCluster => {
            let builder = RedisSaver::builder().cluster(cluster_nodes(c));
            none_shown(c, "builder Debug", &format!("{builder:?}"))?;
        }
        Kind::Sqlite => {
            let path = c.text.strip_prefix("sqlite://").unwrap_or(&c.text);
            none_shown(c, "builder Debug", &format!("{:?}", SqliteSaverBuilder::new(path)))?;
        }
    }
    Ok(())
}

/// The cluster list of a case, as the builder takes it.
fn cluster_nodes(c: &Case) -> Vec<String> {
    let (first, second) = c.text.split_once(",redis://").unwrap_or((&c.text, ""));
    vec![first.to_owned(), format!("redis://{second}")]
}

/// The errors of opening and of a first call (no server listens on port 1,
/// no socket is there): every `source()` of them.
fn check_errors(rt: &tokio::runtime::Runtime, c: &Case) -> Result<(), TestCaseError> {
    match c.kind {
        Kind::Postgres => {
            let builder = PostgresSaver::builder()
                .url(c.text.clone())
                .connect_timeout(std::time::Duration::from_secs(2));
            match builder.build() {
                Err(e) => none_shown(c, "build error", &chain(&e))?,
                Ok(saver) => {
                    none_shown(c, "saver Debug", &format!("{saver:?}"))?;
                    let e = rt
                        .block_on(saver.get_tuple(&CheckpointConfig::new("t")))
                        .expect_err("no server at port 1");
                    none_shown(c, "get_tuple error", &chain(&e))?;
                }
            }
        }
        Kind::Redis => {
            let builder = RedisSaver::builder()
                .url(c.text.clone())
                .connection_timeout(Some(std::time::Duration::from_secs(2)));
            let e = rt.block_on(builder.open()).expect_err("no server at port 1");
            none_shown(c, "open error", &chain(&e))?;
        }
        Kind::RedisCluster => {
            let builder = RedisSaver::builder()
                .cluster(cluster_nodes(c))
                .connection_timeout(Some(std::time::Duration::from_secs(2)));
            let e = rt.block_on(builder.open()).expect_err("no server at port 1");
            none_shown(c, "open error", &chain(&e))?;
        }
        // nothing to open: a path
        Kind::Sqlite => {}
    }
    Ok(())
}

/// `cases` generated cases (`PROPTEST_CASES` overrides it).
fn runner(cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

fn no_form_shows_its_password() {
    runner(2048).run(&case(), |c| check_shown(&c)).unwrap();
}

fn no_error_shows_its_password() {
    let rt = runtime();
    runner(96).run(&case(), |c| check_errors(&rt, &c)).unwrap();
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "secrets::redis_builder_debug_hides_passwords_with_reserved_characters",
            &[],
            redis_builder_debug_hides_passwords_with_reserved_characters,
        ),
        harness::test(
            "secrets::redis_unix_pass_is_masked_in_debug",
            &[],
            redis_unix_pass_is_masked_in_debug,
        ),
        harness::test(
            "secrets::redis_open_errors_hide_passwords_with_reserved_characters",
            &[],
            redis_open_errors_hide_passwords_with_reserved_characters,
        ),
        harness::test(
            "secrets::redis_query_credentials_are_refused",
            &[],
            redis_query_credentials_are_refused,
        ),
        harness::test(
            "secrets::sqlite_builder_debug_masks_query_secrets",
            &[],
            sqlite_builder_debug_masks_query_secrets,
        ),
        harness::test("secrets::no_form_shows_its_password", &[], no_form_shows_its_password),
        harness::test("secrets::no_error_shows_its_password", &[], no_error_shows_its_password),
    ]
}
