//! `rediss://` stores, against TLS-only `redis-server`s the tests start
//! with a throwaway CA (`tests/support/redis_tls.rs`: `openssl` and a
//! `redis-server` built with TLS): every read command and `copy` over TLS
//! with the CA given as `?ca=PATH`, a client certificate as
//! `&cert=PATH&key=PATH`, and a server certificate no trusted CA signed
//! reported with exit 4 and a hint, the password masked.

use crate::harness;
use crate::redis_support::fresh_prefix;
use crate::support::{run, sqlite_url, testdata_dir, Out};

#[path = "../../../tests/support/redis_tls.rs"]
mod redis_tls_support;

use redis_tls_support::{tls, PASSWORD};

/// `openssl` and a `redis-server` built with TLS (the servers start).
static TLS: harness::Need = harness::Need::new("openssl and redis-server with TLS", redis_tls_support::available);

/// `path` for a query parameter: `%`, `&`, `#`, `?`, `+` and spaces escaped.
fn escaped(path: &std::path::Path) -> String {
    let mut out = String::new();
    for ch in path.display().to_string().chars() {
        match ch {
            '%' | '&' | '#' | '?' | ' ' | '+' => out.push_str(&format!("%{:02X}", ch as u32)),
            _ => out.push(ch),
        }
    }
    out
}

/// No password, no `SECRET`, in either stream.
#[track_caller]
fn masked(out: &Out) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.stderr.contains(PASSWORD) && !stdout.contains(PASSWORD),
        "printed the password:\nstderr: {}\nstdout: {stdout}",
        out.stderr
    );
}

/// A fixture copied to a `rediss://` store, then `threads`, `history`,
/// `show`, `export` and `stats` over TLS as on the file; without `ca=` the
/// server's certificate is refused (exit 4, a hint naming `ca=`).
fn every_read_command_works_over_tls() {
    let tls = tls().unwrap();
    let fixture = testdata_dir().join("fixtures").join("b_reducer.sqlite");
    let src = sqlite_url(&fixture);
    let prefix = fresh_prefix();
    let ca = escaped(&tls.path("ca.pem"));
    let store = format!("{}?prefix={prefix}&ca={ca}", tls.url());

    let copied = run(&["--json", "copy", &src, &store]).expect(0);
    masked(&copied);
    assert_eq!(copied.json()["checkpoints"], 12, "{}", copied.text());
    for args in [
        &["threads"][..],
        &["history", "b-2"],
        &["show", "b-2"],
        &["show", "b-1", "--json"],
    ] {
        let (cmd, rest) = args.split_first().unwrap();
        let over_tls: Vec<&str> = [*cmd, &store].into_iter().chain(rest.iter().copied()).collect();
        let on_file: Vec<&str> = [*cmd, &src].into_iter().chain(rest.iter().copied()).collect();
        let out = run(&over_tls).expect(0);
        masked(&out);
        assert_eq!(out.text(), run(&on_file).expect(0).text(), "{args:?}");
    }
    let mut export = run(&["export", &store]).expect(0).json();
    let mut expected = run(&["export", &src]).expect(0).json();
    export["source"] = serde_json::Value::Null;
    expected["source"] = serde_json::Value::Null;
    assert_eq!(export, expected);
    let stats = run(&["--json", "stats", &store]).expect(0).json();
    assert!(stats["memory_bytes"].as_u64().unwrap() > 0, "{stats}");

    // the webpki roots do not hold the test CA; another CA did not sign it
    let other = escaped(&tls.path("other-ca.pem"));
    for url in [
        format!("{}?prefix={prefix}", tls.url()),
        format!("{}?prefix={prefix}&ca={other}", tls.url()),
    ] {
        let out = run(&["threads", &url]).expect(4);
        masked(&out);
        assert!(out.stderr.contains("rediss://:***@127.0.0.1"), "{}", out.stderr);
        assert!(out.stderr.contains("UnknownIssuer"), "{}", out.stderr);
        assert!(out.stderr.contains("?ca=/path/ca.pem"), "{}", out.stderr);
    }
    // a CA file that is not there: exit 3
    let out = run(&["threads", &format!("{}?ca=/no/such/ca.pem", tls.url())]).expect(3);
    masked(&out);
    assert!(out.stderr.contains("/no/such/ca.pem"), "{}", out.stderr);
}

/// A server that requires a client certificate: `cert=` and `key=` give
/// it; without them, exit 4 and a hint naming them.
fn a_client_certificate_from_the_url() {
    let tls = tls().unwrap();
    let ca = escaped(&tls.path("ca.pem"));
    let prefix = fresh_prefix();
    let plain = format!("{}?prefix={prefix}&ca={ca}", tls.mtls_url());
    let out = run(&["copy", "memory:", &plain]).expect(4);
    assert!(out.stderr.contains("cert=/path/client.pem"), "{}", out.stderr);
    let store = format!(
        "{plain}&cert={}&key={}",
        escaped(&tls.path("client.pem")),
        escaped(&tls.path("client.key"))
    );
    let src = sqlite_url(&testdata_dir().join("fixtures").join("b_reducer.sqlite"));
    run(&["copy", &src, &store, "--thread", "b-1"]).expect(0);
    let threads = run(&["--json", "threads", &store]).expect(0).json();
    assert_eq!(threads["threads"][0]["thread_id"], "b-1", "{threads}");
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "redis_tls::every_read_command_works_over_tls",
            &[&TLS],
            every_read_command_works_over_tls,
        ),
        harness::test(
            "redis_tls::a_client_certificate_from_the_url",
            &[&TLS],
            a_client_certificate_from_the_url,
        ),
    ]
}
