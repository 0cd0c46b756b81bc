//! `delete-thread URL THREAD…`: every checkpoint, write and value of the
//! threads, in all namespaces.

use serde_json::json;

use super::{finish, open};
use crate::args::DeleteThreadArgs;
use crate::error::{CliResult, Context};
use crate::output::{emit, emit_json, Ui};
use crate::store::{Access, Store};

pub async fn run(args: DeleteThreadArgs, ui: Ui) -> CliResult {
    let store = open(&args.url, Access::Write).await?;
    let out = body(&store, &args).await;
    let deleted = finish(store, out).await?;
    if ui.json {
        return emit_json(&json!({
            "deleted": deleted.iter().map(|(t, n)| json!({"thread_id": t, "checkpoints": n})).collect::<Vec<_>>(),
        }));
    }
    let mut text = String::new();
    for (t, n) in &deleted {
        text.push_str(&format!("deleted thread {t:?} ({n} checkpoints)\n"));
    }
    emit(&text)
}

async fn body(store: &Store, args: &DeleteThreadArgs) -> CliResult<Vec<(String, u64)>> {
    // all or nothing: a missing thread fails before anything is deleted
    store.require_threads(&args.threads).await?;
    let mut deleted = Vec::new();
    for t in &args.threads {
        if deleted.iter().any(|(d, _)| d == t) {
            continue;
        }
        let n: u64 = store.thread_namespaces(t).await?.iter().map(|(_, n)| n).sum();
        store
            .saver
            .delete_thread(t)
            .await
            .context(format!("cannot delete thread {t:?} of {}", store.name()))?;
        deleted.push((t.clone(), n));
    }
    Ok(deleted)
}
