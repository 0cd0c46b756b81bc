//! rusqlite errors as the crate's [`Error`].

use rusqlite::ErrorCode;

use crate::error::Error;

/// Whether SQLite answered that another connection holds the lock a
/// statement needs (busy or locked): trying again later can succeed.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// What every write to a saver opened read-only answers
/// ([`SqliteSaverBuilder::read_only`](super::SqliteSaverBuilder::read_only)),
/// whatever its arguments: the same kind for every operation.
pub(crate) fn read_only(operation: &'static str) -> Error {
    Error::Unsupported {
        operation,
        implementer: "SqliteSaver opened read-only",
    }
}

/// Turns a rusqlite error into the crate's storage error; busy and locked
/// databases are retryable.
pub(crate) fn sql_error(e: rusqlite::Error) -> Error {
    let retryable = is_busy(&e);
    Error::storage("sqlite", retryable, e)
}
