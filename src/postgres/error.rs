//! What failures mean: driver and pool failures classified into the crate's
//! [`Error`], the errors of a timed-out call and of a malformed connection
//! string, and the words of a `tokio_postgres` failure.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::PoolError;

use crate::error::Error;
use crate::secret::redact;

/// A failure inside an operation, before it is classified into an [`Error`].
#[derive(Debug)]
pub(crate) enum DbError {
    /// No connection could be had: nothing was sent. (Shared, as a
    /// failure of a group commit is every member's.)
    Pool(Arc<PoolError>),
    /// The server or the connection failed a statement. (Shared, as
    /// [`Pool`](Self::Pool).)
    Pg(Arc<tokio_postgres::Error>),
    /// Anything else (bad input, undecodable rows).
    Crate(Error),
}

impl From<PoolError> for DbError {
    fn from(e: PoolError) -> Self {
        DbError::Pool(Arc::new(e))
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError::Pg(Arc::new(e))
    }
}

impl From<Error> for DbError {
    fn from(e: Error) -> Self {
        DbError::Crate(e)
    }
}

/// SQLSTATEs after which the statement certainly did not take effect and a
/// new attempt may succeed: connection exceptions (class 08), server
/// shutdown or crash (57P01–57P03), insufficient resources (class 53),
/// serialization failures and deadlocks (40001, 40P01), lock timeouts
/// (55P03), statements cancelled by `statement_timeout` or a cancel request
/// (57014).
fn transient_state(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(
            code,
            "57P01" | "57P02" | "57P03" | "40001" | "40P01" | "55P03" | "57014"
        )
}

/// Whether a failure to open a connection may pass: the server unreachable
/// or refusing for now (starting up, shutting down, out of connections or
/// memory: classes 08 and 53, 57P01–57P03), the network failing, a timeout.
/// What no retry mends is permanent: the server refused the database (3D000
/// `invalid_catalog_name`), the role or its password (class 28) or the
/// role's access (42501 `insufficient_privilege`), or any other SQLSTATE
/// that is not [transient](transient_state); the configuration is invalid,
/// authentication could not even be attempted, or TLS could not be set up
/// (see [`tls_transient`]).
fn connect_transient(e: &tokio_postgres::Error) -> bool {
    if let Some(code) = e.code() {
        return transient_state(code.code());
    }
    // `tokio_postgres` does not expose its error kinds, but its `Display`
    // is the kind's name alone (the cause is its `source`).
    match e.to_string().as_str() {
        "invalid configuration" | "invalid connection string" | "authentication error" => false,
        "error performing TLS handshake" => tls_transient(e),
        _ => true,
    }
}

/// Whether a TLS handshake failed on the way (the connection reset or timed
/// out mid-handshake) rather than on what was agreed: a certificate or
/// protocol one side refuses (rustls' errors are I/O errors of kind
/// `InvalidData`), a server name that cannot be checked (`InvalidInput`), a
/// server without TLS, or no TLS configured for `sslmode=require`.
fn tls_transient(e: &tokio_postgres::Error) -> bool {
    causes(e)
        .find_map(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| {
            !matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
            )
        })
}

/// Whether a pool could not hand out a connection for a reason that may
/// pass: every connection busy past the wait timeout, a connection that
/// could not be made in time, or a [transient](connect_transient) failure
/// to connect.
fn pool_transient(e: &PoolError) -> bool {
    match e {
        PoolError::Backend(pg) => connect_transient(pg),
        PoolError::Timeout(_) => true,
        _ => false,
    }
}

/// Whether the connection broke (rather than the statement being refused).
fn connection_broke(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        let code = code.code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    causes(e).any(|s| s.is::<std::io::Error>())
}

impl DbError {
    /// Whether the connection (or the server) went away.
    pub(crate) fn connection_broke(&self) -> bool {
        match self {
            DbError::Pool(e) => matches!(**e, PoolError::Backend(_)),
            DbError::Pg(e) => connection_broke(e),
            _ => false,
        }
    }

    /// Whether a read that failed this way is worth one more attempt on a
    /// fresh connection.
    pub(crate) fn worth_retrying_read(&self) -> bool {
        match self {
            DbError::Pool(e) => pool_transient(e),
            // A statement cancelled by statement_timeout would likely be
            // cancelled again: not repeated here.
            DbError::Pg(e) => {
                connection_broke(e)
                    || e.code()
                        .is_some_and(|c| transient_state(c.code()) && c.code() != "57014")
            }
            DbError::Crate(_) => false,
        }
    }

    /// The same failure again, for another member of a group commit. A
    /// crate error (never one of a group's statements) keeps its words.
    pub(crate) fn share(&self) -> DbError {
        match self {
            DbError::Pool(e) => DbError::Pool(e.clone()),
            DbError::Pg(e) => DbError::Pg(e.clone()),
            DbError::Crate(e) => DbError::Crate(Error::storage("postgres", false, e.to_string())),
        }
    }

    /// The error a caller sees. `idempotent_read` says whether the operation
    /// only read (so repeating it is always safe).
    pub(crate) fn into_error(self, op: &'static str, idempotent_read: bool) -> Error {
        match self {
            DbError::Crate(e) => e,
            DbError::Pool(e) => {
                let retryable = pool_transient(&e);
                let why = match &*e {
                    PoolError::Backend(pg) => describe(pg),
                    other => other.to_string(),
                };
                Error::storage(
                    "postgres",
                    retryable,
                    Failure::new(format!("{op}: no database connection ({why})"), Some(Box::new(e))),
                )
            }
            DbError::Pg(e) => {
                if let Some(code) = e.code() {
                    let code = code.code();
                    if code.starts_with("22") {
                        // Class 22 (data exception). The saver checks what it
                        // sends (text without U+0000, finite numbers), so on a
                        // read the data at fault is what is stored (say a
                        // `channel_versions` that is not an object); on a
                        // write it is the caller's value.
                        if idempotent_read {
                            return Error::serde(format!("{op}: stored data PostgreSQL cannot read: {}", describe(&e)));
                        }
                        return Error::invalid(format!("{op}: PostgreSQL refused a value: {}", describe(&e)));
                    }
                    // The server answered with an error: the statement (and its
                    // transaction) did not take effect.
                    let retryable = transient_state(code);
                    return Error::storage(
                        "postgres",
                        retryable,
                        Failure::new(format!("{op} failed: {}", describe(&e)), Some(Box::new(e))),
                    );
                }
                if idempotent_read {
                    let retryable = connection_broke(&e);
                    return Error::storage(
                        "postgres",
                        retryable,
                        Failure::new(format!("{op}: connection failed: {}", describe(&e)), Some(Box::new(e))),
                    );
                }
                if connection_broke(&e) {
                    // The request may have reached the server and committed
                    // before the connection went away: we cannot tell.
                    return Error::storage(
                        "postgres",
                        false,
                        Failure::new(
                            format!(
                                "{op}: the connection was lost while the call was in flight; it may or may not \
                                 have been applied (repeating it is safe: the operation is idempotent)"
                            ),
                            Some(Box::new(e)),
                        ),
                    );
                }
                Error::storage(
                    "postgres",
                    false,
                    Failure::new(format!("{op} failed: {}", describe(&e)), Some(Box::new(e))),
                )
            }
        }
    }
}

/// The server's message with its severity, SQLSTATE, detail and hint, or
/// the error with its causes (`tokio_postgres::Error`'s own `Display` says
/// only "db error" for a server error).
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{} ({}): {}", db.severity(), db.code().code(), db.message());
        if let Some(detail) = db.detail() {
            text.push_str("; detail: ");
            text.push_str(detail);
        }
        if let Some(hint) = db.hint() {
            text.push_str("; hint: ");
            text.push_str(hint);
        }
        return text;
    }
    with_causes(e)
}

/// What a failure of `tokio_postgres` (or of a pool handing out its
/// connections) says, for messages: a server error as the server put it
/// (severity, SQLSTATE, message, detail, hint), anything else with its
/// causes. `tokio_postgres::Error`'s own `Display` reads only "db error" for
/// a server error. Neither names a password.
///
/// ```
/// use checkpointer::postgres::{error_message, tokio_postgres};
/// let e = "host=h port=x".parse::<tokio_postgres::Config>().unwrap_err();
/// assert_eq!(error_message(&e), "invalid connection string: invalid value for option `port`");
/// ```
pub fn error_message(e: &(dyn StdError + 'static)) -> String {
    match std::iter::successors(Some(e), |&err| err.source())
        .find_map(|err| err.downcast_ref::<tokio_postgres::Error>())
    {
        Some(pg) => describe(pg),
        None => with_causes(e),
    }
}

/// The causes of `e`, nearest first (not `e` itself).
fn causes<'a>(e: &'a (dyn StdError + 'static)) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(e.source(), |&s| s.source())
}

/// `e` and its causes, `": "`-joined.
fn with_causes(e: &(dyn StdError + 'static)) -> String {
    let mut text = e.to_string();
    for s in causes(e) {
        text.push_str(": ");
        text.push_str(&s.to_string());
    }
    text
}

/// The source of a postgres [`Error::Storage`]: what failed, in words.
#[derive(Debug)]
pub(crate) struct Failure {
    message: String,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl Failure {
    pub(crate) fn new(message: String, source: Option<Box<dyn StdError + Send + Sync + 'static>>) -> Self {
        Failure { message, source }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for Failure {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref().map(|s| s as &(dyn StdError + 'static))
    }
}

/// The error of a call that timed out; `sent` says whether what may commit
/// had been sent.
pub(super) fn timeout_error(op: &'static str, limit: Duration, sent: bool) -> Error {
    let message = if sent {
        format!(
            "{op}: no answer from PostgreSQL within {limit:?} after the change was sent; it may or may not have \
             been applied (repeating it is safe: the operation is idempotent)"
        )
    } else {
        format!("{op}: no answer from PostgreSQL within {limit:?}; nothing was committed")
    };
    Error::storage("postgres", !sent, Failure::new(message, None))
}

/// The error for a connection string `tokio_postgres` cannot parse: the
/// string with its passwords masked, and the parser's reason where that
/// cannot quote a password (an unknown option's name is shown only when the
/// masked string shows it too).
pub(super) fn parse_error(text: &str, e: &tokio_postgres::Error) -> Error {
    let shown = redact(text);
    let cause = std::error::Error::source(e)
        .map(ToString::to_string)
        .unwrap_or_default();
    let reason = if let Some(name) = cause.strip_prefix("unknown option `").and_then(|n| n.strip_suffix('`')) {
        if !name.is_empty() && shown.contains(name) {
            cause.clone()
        } else {
            "unknown option".to_owned()
        }
    } else if cause.starts_with("unexpected character at byte") {
        // "...: expected `=` but got `c`": the character may be a password's
        cause.split(':').next().unwrap_or_default().to_owned()
    } else if cause.starts_with("invalid value for option")
        || cause == "unexpected EOF"
        || cause == "unterminated parameter"
        || cause == "unterminated quoted connection parameter value"
    {
        cause.clone()
    } else {
        "malformed".to_owned()
    };
    Error::invalid(format!("invalid PostgreSQL connection string {shown:?}: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_states() {
        for c in ["08006", "57P01", "40001", "40P01", "53300", "55P03", "57014"] {
            assert!(transient_state(c), "{c}");
        }
        for c in ["23505", "22021", "42P01", "XX000"] {
            assert!(!transient_state(c), "{c}");
        }
        // configuration and permission: the database, the role, its
        // password, its access, a schema
        for c in ["3D000", "28000", "28P01", "42501", "3F000"] {
            assert!(!transient_state(c), "{c}");
        }
    }

    #[test]
    fn a_connection_string_tokio_postgres_refuses_is_permanent() {
        let e = "host=h port=x".parse::<tokio_postgres::Config>().unwrap_err();
        assert!(!connect_transient(&e));
        assert!(!DbError::Pool(Arc::new(PoolError::Backend(e))).worth_retrying_read());
    }
}
