//! `SqliteSaver`'s row decoding, through the public API: fuzzed bytes are
//! written as one checkpoint row and one write row of a SQLite file (as
//! another program could), then read with `get_tuple`, `list`,
//! `list_threads` and `get_delta_channel_history`. Reading never panics:
//! every outcome is a tuple or a typed error.
//!
//! Input: `[tag len u8][tag][checkpoint len u16 le][checkpoint][metadata len
//! u16 le][metadata][write tag len u8][write tag][write value…]`; a tag of
//! length 255 is NULL.
#![no_main]

use std::sync::OnceLock;

use checkpointer::sqlite::SqliteSaver;
use checkpointer::{CheckpointConfig, CheckpointSaver, CheckpointSaverExt, ListOptions, ListThreadsOptions};
use libfuzzer_sys::fuzz_target;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    saver: SqliteSaver,
    raw: std::sync::Mutex<rusqlite::Connection>,
    _dir: std::path::PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("checkpointer-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rows.sqlite");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let saver = runtime.block_on(SqliteSaver::open(&path)).unwrap();
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
        Fixture {
            runtime,
            saver,
            raw: std::sync::Mutex::new(raw),
            _dir: dir,
        }
    })
}

struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        head
    }
    fn u8(&mut self) -> usize {
        self.take(1).first().map_or(0, |&b| usize::from(b))
    }
    fn u16(&mut self) -> usize {
        let b = self.take(2);
        usize::from(b.first().copied().unwrap_or(0)) | usize::from(b.get(1).copied().unwrap_or(0)) << 8
    }
    fn tag(&mut self) -> Option<String> {
        let n = self.u8();
        if n == 255 {
            return None;
        }
        Some(String::from_utf8_lossy(self.take(n)).into_owned())
    }
}

const ID: &str = "1ef00000-0000-6000-8000-000000000001";

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let mut input = Input(data);
    let tag = input.tag();
    let n = input.u16();
    let checkpoint = input.take(n).to_vec();
    let n = input.u16();
    let metadata = input.take(n).to_vec();
    let write_tag = input.tag();
    let write_value = input.0.to_vec();
    {
        let raw = f.raw.lock().unwrap();
        raw.execute_batch("DELETE FROM checkpoints; DELETE FROM writes;")
            .unwrap();
        raw.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) \
             VALUES ('t', '', ?1, ?1, ?2, ?3, ?4)",
            rusqlite::params![ID, tag, checkpoint, metadata],
        )
        .unwrap();
        raw.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value) \
             VALUES ('t', '', ?1, 'task', '', 0, 'x', ?2, ?3)",
            rusqlite::params![ID, write_tag, write_value],
        )
        .unwrap();
    }
    f.runtime.block_on(async {
        let config = CheckpointConfig::new("t");
        let _ = f.saver.get_tuple(&config).await;
        let _ = f.saver.get_tuple(&config.clone().with_checkpoint_id(ID)).await;
        let _ = f.saver.list_vec(None, ListOptions::default().filter("step", 1)).await;
        let _ = f.saver.list_threads(ListThreadsOptions::default()).await;
        let _ = f.saver.get_delta_channel_history(&config, &["x".to_owned()]).await;
    });
});
