//! Redis errors as [`Error::Storage`], the URL's secrets scrubbed from
//! every message ([`crate::secret`]).

use std::fmt;

use redis::{RedisError, RetryMethod};

use crate::error::Error;
use crate::secret::Secrets;

/// A Redis failure, its message already redacted.
#[derive(Debug)]
pub(crate) struct RedisFailure(String);

impl fmt::Display for RedisFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedisFailure {}

impl RedisFailure {
    /// A failure with this (already redacted) message.
    pub(crate) fn new(message: String) -> Self {
        RedisFailure(message)
    }
}

/// Whether repeating the call may succeed and is safe: the server refused
/// it before running anything (loading, busy with another script, a
/// cluster redirect being resolved), the connection was refused, or the
/// call was a read and the connection broke or timed out (a write whose
/// connection broke or timed out may have been applied). Never for a
/// [`permanent`] failure.
fn retryable(e: &RedisError, read: bool) -> bool {
    if permanent(e) {
        return false;
    }
    if e.is_connection_refusal() || busy(e) {
        return true;
    }
    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ExecAbort) {
        // `EXECABORT`: the server refused the queued commands, so nothing of
        // the transaction ran; repeating it may succeed when every refusal
        // was a passing state (loading, busy, a cluster settling)
        return e.clone().into_server_errors().is_some_and(|errors| {
            !errors.is_empty()
                && errors
                    .iter()
                    .all(|(_, s)| matches!(s.code(), "LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN"))
        });
    }
    match e.retry_method() {
        RetryMethod::WaitAndRetry | RetryMethod::RetryImmediately => !e.is_io_error() || read,
        RetryMethod::Reconnect
        | RetryMethod::ReconnectFromInitialConnections
        | RetryMethod::AskRedirect
        | RetryMethod::MovedRedirect
        | RetryMethod::RefreshSlotsAndRetry => read || e.is_cluster_error(),
        _ => false,
    }
}

/// Whether no retry mends the failure, which is the configuration's: the
/// server refused the credentials (`NOAUTH`: none given, `WRONGPASS`, an
/// `AUTH` refused) or a command to the user (`NOPERM`, anywhere in a
/// pipeline), the client's settings are invalid, or the TLS session could
/// not be set up (a certificate or protocol the other side refuses: an I/O
/// error of kind `InvalidData`, as rustls reports them) or the system
/// refused the connection (`PermissionDenied`).
fn permanent(e: &RedisError) -> bool {
    const REFUSALS: [&str; 3] = ["NOAUTH", "WRONGPASS", "NOPERM"];
    if matches!(
        e.kind(),
        redis::ErrorKind::AuthenticationFailed | redis::ErrorKind::InvalidClientConfig
    ) {
        return true;
    }
    if e.clone()
        .into_server_errors()
        .is_some_and(|errors| errors.iter().any(|(_, s)| REFUSALS.contains(&s.code())))
    {
        return true;
    }
    io_kind(e).is_some_and(|kind| {
        matches!(
            kind,
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::PermissionDenied
        )
    })
}

/// The kind of the I/O error `e` wraps, if it wraps one (the `redis` crate
/// keeps it behind an `Arc` and does not hand it out).
fn io_kind(e: &RedisError) -> Option<std::io::ErrorKind> {
    let source = std::error::Error::source(e)?;
    source
        .downcast_ref::<std::io::Error>()
        .or_else(|| {
            source
                .downcast_ref::<std::sync::Arc<dyn std::error::Error + Send + Sync>>()
                .and_then(|inner| inner.downcast_ref::<std::io::Error>())
        })
        .map(std::io::Error::kind)
}

/// Whether the server refused the call because it was running another
/// script past `busy-reply-threshold` (`BUSY`, which the `redis` crate does
/// not classify): it ran nothing of ours. In a pipeline (an index update),
/// the first command's answer decides.
fn busy(e: &RedisError) -> bool {
    e.code() == Some("BUSY")
        || e.clone()
            .into_server_errors()
            .is_some_and(|errors| errors.first().is_some_and(|(_, s)| s.code() == "BUSY"))
}

/// `e` as the crate's error for operation `op`.
pub(crate) fn storage(e: RedisError, op: &str, read: bool, secrets: &Secrets) -> Error {
    let mut message = format!("{op}: {e}");
    // TLS settings that no retry changes
    let tls_hint = if message.contains("invalid peer certificate: UnknownIssuer") {
        Some(" (no trusted CA signed the server's certificate: for a private CA, trust it with tls_root_ca_pem)")
    } else if message.contains("CertificateRequired") {
        Some(" (the server requires a client certificate: tls_client_cert_pem)")
    } else if message.contains("invalid peer certificate") {
        Some("")
    } else {
        None
    };
    let retryable = retryable(&e, read) && tls_hint.is_none();
    message.push_str(tls_hint.unwrap_or(""));
    if !read && !retryable && (e.is_io_error() || e.is_connection_dropped() || e.is_timeout()) {
        message.push_str(" (the write may or may not have been applied; every write is idempotent)");
    }
    Error::storage("redis", retryable, RedisFailure(secrets.scrub(&message)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_when_nothing_may_have_been_applied() {
        let io = |kind| RedisError::from(std::io::Error::new(kind, "x"));
        // refused: nothing was sent
        let refused = io(std::io::ErrorKind::ConnectionRefused);
        assert!(retryable(&refused, true) && retryable(&refused, false));
        // broke mid-call: a read may be repeated, a write may have applied
        let reset = io(std::io::ErrorKind::ConnectionReset);
        assert!(retryable(&reset, true) && !retryable(&reset, false));
        let err = storage(
            io(std::io::ErrorKind::ConnectionReset),
            "put",
            false,
            &Secrets::default(),
        );
        assert!(
            !err.is_retryable() && err.to_string().contains("may or may not"),
            "{err}"
        );
        assert!(storage(
            io(std::io::ErrorKind::ConnectionRefused),
            "put",
            false,
            &Secrets::default()
        )
        .is_retryable());
        // busy with another script: refused, nothing ran
        let busy = redis::make_extension_error("BUSY".into(), Some("Redis is busy running a script".into()));
        assert!(retryable(&busy, true) && retryable(&busy, false));
        let other = redis::make_extension_error("SOMEERR".into(), None);
        assert!(!retryable(&other, false));
    }

    #[test]
    fn refused_credentials_and_settings_are_permanent() {
        for code in ["NOAUTH", "WRONGPASS", "NOPERM"] {
            let e = redis::make_extension_error(code.into(), Some("refused".into()));
            assert!(!retryable(&e, true) && !retryable(&e, false), "{code}");
        }
        let auth = RedisError::from((redis::ErrorKind::AuthenticationFailed, "Password authentication failed"));
        assert!(!retryable(&auth, true), "{auth}");
        // rustls reports a certificate or protocol it refuses as InvalidData
        let tls = RedisError::from(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "invalid peer certificate",
        ));
        assert!(!retryable(&tls, true), "{tls}");
        let reset = RedisError::from(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "x"));
        assert!(retryable(&reset, true), "{reset}");
    }
}
