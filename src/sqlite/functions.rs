//! The SQL functions this crate registers on each of its connections: the
//! metadata filter of `list` and `list_threads`, and the `run_id` of stored
//! metadata for `delete_for_runs`. Nothing in the file refers to them, so
//! Python's saver opens the same file without them.

use indexmap::IndexMap;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::Connection;

use super::error::sql_error;
use super::pool::inline_read_must_stop;
use super::rows::{metadata_bytes, metadata_from_ref};
use crate::checkpoint::CheckpointMetadata;
use crate::error::{Error, Result};
use crate::saver::{filter_matches, metadata_matches};
use crate::serde::{json, msgpack, Value};

/// The name of the SQL function that applies [`metadata_matches`] to a stored
/// metadata column and a msgpack-encoded filter map.
const FN_METADATA_MATCHES: &str = "checkpointer_metadata_matches";
/// The name of the SQL function that reads `run_id` from stored metadata.
const FN_METADATA_RUN_ID: &str = "checkpointer_metadata_run_id";

/// Registers this crate's SQL functions on a connection. They exist only on
/// this crate's connections; nothing in the file refers to them.
pub(crate) fn register_functions(conn: &Connection) -> Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function(FN_METADATA_MATCHES, 2, flags, |ctx| {
        // One call runs between two looks of the progress handler: on the
        // caller's thread, a row or filter too big to compare within the
        // inline budget stops the read here, and it runs again in a blocking
        // task.
        let size = |i| match ctx.get_raw(i) {
            ValueRef::Blob(b) | ValueRef::Text(b) => b.len(),
            _ => 0,
        };
        if inline_read_must_stop(size(0) + size(1)) {
            return Err(rusqlite::Error::UserFunctionError(
                "stopped: over the inline read budget".into(),
            ));
        }
        let filter = ctx.get_or_create_aux(1, |raw| -> Result<IndexMap<String, Value>> {
            let bytes = raw
                .as_blob()
                .map_err(|e| Error::invalid(format!("filter argument: {e}")))?;
            match msgpack::decode(bytes)? {
                Value::Map(entries) => entries
                    .into_iter()
                    .map(|(k, v)| match k {
                        Value::Str(k) => Ok((k.into_string(), v)),
                        _ => Err(Error::invalid("filter key is not a string")),
                    })
                    .collect(),
                _ => Err(Error::invalid("filter is not a map")),
            }
        })?;
        // Metadata that does not parse passes, so the row is returned and its
        // decoding error reaches the caller instead of the row vanishing.
        Ok(stored_metadata_matches(ctx.get_raw(0), &filter).unwrap_or(true))
    })
    .map_err(sql_error)?;
    conn.create_scalar_function(FN_METADATA_RUN_ID, 1, flags, |ctx| {
        Ok(metadata_from_ref(ctx.get_raw(0))
            .ok()
            .and_then(|m| m.run_id().map(str::to_owned)))
    })
    .map_err(sql_error)?;
    #[cfg(feature = "store")]
    crate::store::sqlite::register_vector_functions(conn)?;
    Ok(())
}

/// [`metadata_matches`] on a stored metadata column, as
/// [`metadata_from_ref`] would read it but without building the
/// [`CheckpointMetadata`] (this runs for every row a filtered `list` scans);
/// `None` when the column is not readable metadata.
fn stored_metadata_matches(value: ValueRef<'_>, filter: &IndexMap<String, Value>) -> Option<bool> {
    let Some(entries) = json::metadata_entries(metadata_bytes(value).ok()?).ok()? else {
        return Some(metadata_matches(&CheckpointMetadata::default(), filter));
    };
    // the last of duplicate keys wins, as in `CheckpointMetadata::from_json`
    if filter.len() <= 4 {
        let get = |key: &str| {
            entries
                .iter()
                .rev()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v)
        };
        return Some(filter_matches(get, filter));
    }
    let mut by_key: std::collections::HashMap<&str, &Value> = std::collections::HashMap::with_capacity(entries.len());
    for (k, v) in &entries {
        if let Some(k) = k.as_str() {
            by_key.insert(k, v);
        }
    }
    Some(filter_matches(|key| by_key.get(key).copied(), filter))
}

/// A filter as the msgpack map [`FN_METADATA_MATCHES`] reads.
pub(crate) fn encode_filter(filter: &IndexMap<String, Value>) -> Result<Vec<u8>> {
    msgpack::encode(&Value::Map(
        filter
            .iter()
            .map(|(k, v)| (Value::Str(k.as_str().into()), v.clone()))
            .collect(),
    ))
}
