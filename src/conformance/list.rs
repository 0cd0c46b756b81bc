//! Checks of [`CheckpointSaver::list`]: LangGraph's 16 tests (see
//! `docs/design.md`, *Conformance suite*).

use super::*;

/// A thread of four chained checkpoints, each carrying a fresh marker:
/// (input, -1), (loop, 0), (loop, 1), (input, 2, score 42, run_id "run-abc").
pub(crate) struct Fixture {
    pub(crate) thread: String,
    pub(crate) marker: String,
    pub(crate) configs: Vec<CheckpointConfig>,
}

impl Fixture {
    pub(crate) fn ids(&self) -> Vec<String> {
        ids(&self.configs)
    }

    /// The ids newest first.
    pub(crate) fn ids_desc(&self) -> Vec<String> {
        self.ids().into_iter().rev().collect()
    }

    pub(crate) fn thread_config(&self) -> CheckpointConfig {
        generate_config(&self.thread)
    }
}

pub(crate) async fn fixture(s: &dyn CheckpointSaver) -> Result<Fixture, CheckFailure> {
    let thread = new_thread_id();
    let marker = new_thread_id();
    let mut configs = Vec::new();
    let mut parent = generate_config(&thread);
    for (source, step) in [("input", -1), ("loop", 0), ("loop", 1), ("input", 2)] {
        let mut md = marked_metadata(source, step, &marker);
        if step == 2 {
            md.insert("score", 42);
            md.insert("run_id", "run-abc");
        }
        let cp = checkpoint_with(
            &[("step", Value::Int(step))],
            &[("step", ChannelVersion::Int(step + 2))],
        );
        parent = put_all(s, &parent, &cp, &md).await?;
        configs.push(parent.clone());
    }
    Ok(Fixture {
        thread,
        marker,
        configs,
    })
}

/// Listing the whole store (filtered to this check's marker) yields all four
/// checkpoints; so does listing the thread.
pub async fn list_all(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    ensure_eq!(
        list_ids(s, None, marker_filter(&f.marker)).await?,
        f.ids_desc(),
        "list(None)"
    );
    ensure_eq!(
        list_ids(s, Some(f.thread_config()), ListOptions::default()).await?,
        f.ids_desc(),
        "list(thread)"
    );
    Ok(())
}

/// Listing another thread yields nothing of this one.
pub async fn list_by_thread(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let other = generate_config(&new_thread_id());
    ensure_eq!(
        list_ids(s, Some(other), ListOptions::default()).await?,
        Vec::<String>::new(),
        "other thread"
    );
    ensure_eq!(
        list(s, Some(f.thread_config()), ListOptions::default()).await?.len(),
        4,
        "own thread"
    );
    Ok(())
}

/// A namespace in the config restricts the listing to it.
pub async fn list_by_namespace(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let root = generate_checkpoint();
    put_all(s, &generate_config(&t), &root, &generate_metadata("loop", 0)).await?;
    let child = generate_checkpoint();
    let child_cfg = generate_config(&t).with_ns("child:1");
    put_all(s, &child_cfg, &child, &generate_metadata("loop", 0)).await?;
    let got = list(s, Some(generate_config(&t)), ListOptions::default()).await?;
    ensure_eq!(
        got.iter().map(|x| x.config.clone()).collect::<Vec<_>>(),
        vec![stored_config(&t, "", &root.id)],
        "namespace \"\""
    );
    let got = list(s, Some(child_cfg), ListOptions::default()).await?;
    ensure_eq!(
        got.iter().map(|x| x.config.clone()).collect::<Vec<_>>(),
        vec![stored_config(&t, "child:1", &child.id)],
        "namespace child:1"
    );
    Ok(())
}

/// Newest first: ids in reverse insertion order; equal ids order by thread
/// id, then namespace, descending.
pub async fn list_ordering(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    ensure_eq!(
        list_ids(s, Some(f.thread_config()), ListOptions::default()).await?,
        f.ids_desc(),
        "one thread"
    );

    // Ties: one checkpoint id stored in two threads and two namespaces each,
    // plus a newer checkpoint.
    let marker = new_thread_id();
    let mut threads = [new_thread_id(), new_thread_id()];
    threads.sort();
    let shared = generate_checkpoint();
    for t in &threads {
        for ns in ["child:1", ""] {
            let cfg = generate_config(t).with_ns(ns);
            put_all(s, &cfg, &shared, &marked_metadata("loop", 0, &marker)).await?;
        }
    }
    let newer = generate_checkpoint();
    put_all(
        s,
        &generate_config(&threads[0]),
        &newer,
        &marked_metadata("loop", 1, &marker),
    )
    .await?;
    let got: Vec<CheckpointConfig> = list(s, None, marker_filter(&marker))
        .await?
        .into_iter()
        .map(|x| x.config)
        .collect();
    let expected = vec![
        stored_config(&threads[0], "", &newer.id),
        stored_config(&threads[1], "child:1", &shared.id),
        stored_config(&threads[1], "", &shared.id),
        stored_config(&threads[0], "child:1", &shared.id),
        stored_config(&threads[0], "", &shared.id),
    ];
    ensure_eq!(got, expected, "order across threads and namespaces");
    Ok(())
}

/// Filter `{"source": "input"}` matches two of four.
pub async fn list_metadata_filter_single_key(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let got = list_ids(
        s,
        Some(f.thread_config()),
        ListOptions::default().filter("source", "input"),
    )
    .await?;
    ensure_eq!(got, vec![f.ids()[3].clone(), f.ids()[0].clone()], "source=input");
    Ok(())
}

/// Filter `{"step": 1}` matches one.
pub async fn list_metadata_filter_step(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let got = list_ids(s, Some(f.thread_config()), ListOptions::default().filter("step", 1)).await?;
    ensure_eq!(got, vec![f.ids()[2].clone()], "step=1");
    Ok(())
}

/// Filter keys are AND-ed: `{"source": "input", "step": 2}` matches one.
pub async fn list_metadata_filter_multiple_keys(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let opts = ListOptions::default().filter("source", "input").filter("step", 2);
    ensure_eq!(
        list_ids(s, Some(f.thread_config()), opts).await?,
        vec![f.ids()[3].clone()],
        "source=input and step=2"
    );
    let opts = ListOptions::default().filter("source", "input").filter("step", 1);
    ensure_eq!(
        list_ids(s, Some(f.thread_config()), opts).await?,
        Vec::<String>::new(),
        "source=input and step=1"
    );
    Ok(())
}

/// A filter nothing matches yields nothing.
pub async fn list_metadata_filter_no_match(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let opts = ListOptions::default().filter("source", "update");
    ensure_eq!(
        list_ids(s, Some(f.thread_config()), opts).await?,
        Vec::<String>::new(),
        "source=update"
    );
    let opts = marker_filter(&f.marker).filter("step", 99);
    ensure_eq!(
        list_ids(s, None, opts).await?,
        Vec::<String>::new(),
        "step=99 over the store"
    );
    Ok(())
}

/// Custom metadata keys filter: `{"score": 42}` finds the checkpoint with
/// run_id `run-abc`.
pub async fn list_metadata_custom_keys(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let got = list(s, Some(f.thread_config()), ListOptions::default().filter("score", 42)).await?;
    ensure_eq!(got.len(), 1, "matches of score=42");
    ensure_eq!(got[0].metadata.run_id(), Some("run-abc"), "run_id of the match");
    ensure_eq!(got[0].checkpoint.id, f.ids()[3], "id of the match");
    Ok(())
}

/// `before` the third id yields exactly the first two, newest first.
pub async fn list_before(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let ids = f.ids();
    let got = list_ids(
        s,
        Some(f.thread_config()),
        ListOptions::default().before(ids[2].clone()),
    )
    .await?;
    ensure_eq!(got, vec![ids[1].clone(), ids[0].clone()], "before the third");
    Ok(())
}

/// `limit` 1 and 2 yield the newest one and two.
pub async fn list_limit(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let desc = f.ids_desc();
    for n in [1, 2] {
        let got = list_ids(s, Some(f.thread_config()), ListOptions::default().limit(n)).await?;
        ensure_eq!(got, desc[..n].to_vec(), "limit {n}");
    }
    Ok(())
}

/// `before` the fourth id with `limit` 1 yields the third.
pub async fn list_limit_plus_before(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let ids = f.ids();
    let opts = ListOptions::default().before(ids[3].clone()).limit(1);
    ensure_eq!(
        list_ids(s, Some(f.thread_config()), opts).await?,
        vec![ids[2].clone()],
        "before 4th, limit 1"
    );
    Ok(())
}

/// Thread and filter combine: `{"source": "loop"}` in the thread matches two.
pub async fn list_combined_thread_and_filter(s: &dyn CheckpointSaver) -> CheckResult {
    let f = fixture(s).await?;
    let other = fixture(s).await?;
    let got = list_ids(
        s,
        Some(f.thread_config()),
        ListOptions::default().filter("source", "loop"),
    )
    .await?;
    ensure_eq!(
        got,
        vec![f.ids()[2].clone(), f.ids()[1].clone()],
        "source=loop in the thread"
    );
    let got = list_ids(s, Some(other.thread_config()), marker_filter(&f.marker)).await?;
    ensure_eq!(got, Vec::<String>::new(), "other thread with this thread's marker");
    Ok(())
}

/// An unknown thread with a filter yields nothing.
pub async fn list_empty_result(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = generate_config(&new_thread_id());
    let got = list_ids(s, Some(cfg.clone()), ListOptions::default().filter("source", "loop")).await?;
    ensure_eq!(got, Vec::<String>::new(), "unknown thread with filter");
    let got = list_ids(s, Some(cfg), ListOptions::default()).await?;
    ensure_eq!(got, Vec::<String>::new(), "unknown thread");
    Ok(())
}

/// Listed tuples carry their pending writes and parent config.
pub async fn list_includes_pending_writes(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 2).await?;
    put_writes(s, &configs[1], &[("ch", Value::from("v"))], "task1", "").await?;
    let got = list(s, Some(generate_config(&t)), ListOptions::default()).await?;
    ensure_eq!(got.len(), 2, "tuples");
    ensure_eq!(
        got[0].pending_writes,
        vec![pw("task1", "ch", "v")],
        "writes of the newest"
    );
    ensure_eq!(got[0].parent_config, Some(configs[0].clone()), "parent of the newest");
    ensure_eq!(got[0].config, configs[1], "config of the newest");
    ensure_eq!(got[1].pending_writes, vec![], "writes of the oldest");
    ensure_eq!(
        got[1].checkpoint.channel_values.get("step"),
        Some(&Value::Int(0)),
        "value of the oldest"
    );
    Ok(())
}

/// Among three namespaces, listing namespace `""` yields exactly its one.
pub async fn list_multiple_namespaces(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut root_id = String::new();
    for ns in ["", "child:1", "child:2"] {
        let cp = generate_checkpoint();
        if ns.is_empty() {
            root_id = cp.id.clone();
        }
        put_all(s, &generate_config(&t).with_ns(ns), &cp, &generate_metadata("loop", 0)).await?;
    }
    let got = list(s, Some(generate_config(&t)), ListOptions::default()).await?;
    ensure_eq!(
        got.iter().map(|x| x.config.clone()).collect::<Vec<_>>(),
        vec![stored_config(&t, "", &root_id)],
        "namespace \"\""
    );
    Ok(())
}
