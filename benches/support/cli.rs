//! What the command-line benches (`fill`, `retention_load`) share: their
//! arguments or exit 2, and the store of a URL or exit 1.

use std::sync::Arc;

use checkpointer::{OpenOptions, SaverAdmin};

/// The parsed arguments, or the message and exit status 2.
pub fn args_or_exit<T>(parsed: Result<T, String>) -> T {
    parsed.unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    })
}

/// The store behind `url` (created when missing), or the error (its URL
/// masked) and exit status 1.
pub async fn open_or_exit(url: &str) -> Arc<dyn SaverAdmin> {
    OpenOptions::new().open(url).await.unwrap_or_else(|e| {
        eprintln!("cannot open {}: {e}", checkpointer::secret::redact(url));
        std::process::exit(1);
    })
}

/// The value, or the error and exit status 1.
pub fn or_exit<T, E: std::fmt::Display>(result: Result<T, E>) -> T {
    result.unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1);
    })
}

/// Closes the store, or prints why it could not and exits with status 1.
pub async fn close_or_exit(store: &Arc<dyn SaverAdmin>) {
    or_exit(store.close().await.map_err(|e| format!("cannot close: {e}")));
}
