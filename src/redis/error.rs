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
/// connection broke or timed out may have been applied).
fn retryable(e: &RedisError, read: bool) -> bool {
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
}
