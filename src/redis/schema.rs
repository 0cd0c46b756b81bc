//! The layout marker (`<prefix>:layout`), Redis's schema: written on open,
//! checked against the layout this crate writes, and the one migration
//! within it (`docs/design.md`, *Redis layout*).

use super::backend::{Conn, Redis};
use super::{error, keys, queries};
use crate::error::{Error, Result};

/// Writes the layout marker if absent, and refuses a store written in
/// another layout.
pub(super) async fn check_marker(r: &Redis) -> Result<()> {
    let mut conn = r.conn.clone();
    let key = r.keys.marker();
    let (stored,): (Option<String>,) = ::redis::pipe()
        .cmd("SET")
        .arg(&key)
        .arg(keys::MARKER)
        .arg("NX")
        .ignore()
        .cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .map_err(|e| error::storage(e, "open", true, &r.secrets))?;
    match stored.as_deref() {
        Some(keys::MARKER) => move_untagged_empty_thread(r).await,
        other => Err(Error::storage(
            "redis",
            false,
            format!(
                "the keys under prefix {:?} are in layout {:?}, not {:?}",
                r.keys.prefix,
                other.unwrap_or(""),
                keys::MARKER
            ),
        )),
    }
}

/// Moves the keys of the empty thread id from `P:v2:{}` (no hash tag, as
/// stores written before its tag `%` have them) to `P:v2:{%}`, on one
/// server (on a cluster they could not be written). O(1) renames; keys the
/// new base has already are left.
async fn move_untagged_empty_thread(r: &Redis) -> Result<()> {
    if matches!(r.conn, Conn::Cluster(_)) {
        return Ok(());
    }
    let (old, new) = (r.keys.untagged_empty_thread(), r.keys.thread(""));
    let mut inv = queries::MOVE_KEYS.prepare_invoke();
    for suffix in queries::THREAD_KEYS.iter().chain([&":ver"]) {
        inv.key(format!("{old}{suffix}")).key(format!("{new}{suffix}"));
    }
    inv.invoke_async::<()>(&mut r.conn.clone())
        .await
        .map_err(|e| error::storage(e, "open", false, &r.secrets))
}
