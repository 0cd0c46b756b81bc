//! The client-side cost of 30 `get_tuple_encoded` calls (or `get_tuple`,
//! with `MODE=decoded`) on one checkpoint of a chat-like thread, for
//! callgrind; the store is the URL given (any `checkpointer::open` URL).
//!
//! ```sh
//! cargo build --release --example encoded_reads --features postgres,redis
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*encoded_reads*measured*' \
//!     target/release/examples/encoded_reads postgresql://postgres@127.0.0.1:5432/db
//! ```

use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, OpenOptions,
    SaverAdmin, Value,
};

/// A message as LangGraph's runtime stores one: a map of strings.
fn message(i: i64) -> Value {
    Value::Map(
        vec![
            (
                Value::from("type"),
                Value::from(if i % 2 == 0 { "human" } else { "ai" }),
            ),
            (
                Value::from("content"),
                Value::from(format!("message {i}: {}", "lorem ipsum ".repeat(8))),
            ),
            (Value::from("id"), Value::from(format!("run-{i:08}"))),
            (Value::from("additional_kwargs"), Value::Map(Vec::new().into())),
        ]
        .into(),
    )
}

#[inline(never)]
fn measured(rt: &tokio::runtime::Runtime, store: &dyn SaverAdmin, config: &CheckpointConfig, decoded: bool) -> usize {
    rt.block_on(async {
        let mut n = 0;
        for _ in 0..30 {
            n += if decoded {
                store
                    .saver()
                    .get_tuple(config)
                    .await
                    .unwrap()
                    .map_or(0, |t| t.pending_writes.len())
            } else {
                store
                    .encoded()
                    .get_tuple_encoded(config)
                    .await
                    .unwrap()
                    .map_or(0, |t| t.writes.len())
            };
        }
        n
    })
}

fn main() {
    let url = std::env::args().nth(1).expect("a store URL");
    let decoded = std::env::var("MODE").is_ok_and(|m| m == "decoded");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = rt.block_on(OpenOptions::new().open(&url)).unwrap();
    let thread = format!("encoded-reads-{}", std::process::id());
    let config = rt.block_on(async {
        let mut cp = Checkpoint::new(0);
        let mut versions = ChannelVersions::new();
        let channels = [
            (
                "messages",
                Value::Array((0..20).map(message).collect::<Vec<_>>().into()),
            ),
            ("summary", Value::from("a summary ".repeat(20))),
            ("step", Value::Int(7)),
            ("branch:to:agent", Value::Nil),
        ];
        for (name, value) in channels {
            cp.channel_values.insert(name.into(), value);
            versions.insert(name.into(), ChannelVersion::Int(1));
        }
        cp.channel_versions = versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, 1);
        let saver = store.saver();
        let stored = saver
            .put(&CheckpointConfig::new(thread.as_str()), &cp, &meta, &versions)
            .await
            .unwrap();
        let writes: Vec<(String, Value)> = (0..4).map(|i| ("messages".to_owned(), message(100 + i))).collect();
        saver.put_writes(&stored, &writes, "task-1", "").await.unwrap();
        stored
    });
    let n = measured(&rt, store.as_ref(), &config, decoded);
    assert_eq!(n, 30 * 4);
    rt.block_on(store.saver().delete_thread(&thread)).unwrap();
}
