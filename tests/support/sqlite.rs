//! Helpers shared by the SQLite integration tests: where the fixtures
//! (`testdata/`) and the Python peer live, temporary copies, and a tiny graph runner.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's `testdata/` (holding `fixtures/` and `peer/`: data
/// Python LangGraph wrote, see `testdata/README.md`).
pub fn testdata_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

/// The name libtest gives the test at `path`, a `module_path!()` followed by
/// `::` and the function: the path without the crate name. For re-running
/// one test of this binary in a child process with `--exact`.
pub fn test_name(path: &'static str) -> &'static str {
    path.split_once("::").map_or(path, |(_crate, test)| test)
}

/// A command that re-runs the ignored test `path` (a
/// `concat!(module_path!(), "::name")`) of this binary alone, as a child
/// process, with `env` set to `value`; as user `nobody` when
/// `unprivileged` and this process is root.
pub fn child_test(path: &'static str, env: &str, value: impl AsRef<std::ffi::OsStr>, unprivileged: bool) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = if unprivileged && is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    cmd.args([
        test_name(path),
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(env, value);
    cmd
}

/// The body of a child test: `body` with the value of `env` on a
/// two-thread runtime, or nothing when `env` is not set (the test run on
/// its own, not by its parent).
pub fn in_child<F: std::future::Future<Output = ()>>(env: &str, body: impl FnOnce(String) -> F) {
    let Ok(value) = std::env::var(env) else { return };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(body(value));
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// The Python of the peer venv (`CHECKPOINTER_PYTHON`, made by
/// `scripts/python-venv.sh`); fails the test when it is not set (the
/// harness of `tests/python/` ignores the test then, outside CI).
pub fn require_python() -> Option<PathBuf> {
    match std::env::var("CHECKPOINTER_PYTHON") {
        Ok(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => panic!("CHECKPOINTER_PYTHON is not set: set CHECKPOINTER_PYTHON=$(scripts/python-venv.sh | tail -n 1)"),
    }
}

/// The fixture databases (`*.sqlite`) with their names, sorted.
pub fn fixtures(testdata: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(testdata.join("fixtures"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.to_owned();
            name.ends_with(".sqlite").then_some((name, path))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no fixtures in {}", testdata.display());
    out
}

/// A copy of `file` in a fresh temporary directory (the saver writes to the
/// files it opens: WAL mode, indexes), under the same file name.
pub fn temp_copy(file: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join(file.file_name().unwrap());
    std::fs::copy(file, &copy).unwrap();
    (dir, copy)
}

/// Runs a Python script with arguments; returns (status ok, stdout, stderr).
pub fn run_python(python: &Path, script: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the Python program `source` (written to a temporary file) with
/// arguments and returns its stdout; fails the test, showing its stderr,
/// when it does not exit successfully.
pub fn run_python_script(python: &Path, source: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.py");
    std::fs::write(&script, source).unwrap();
    let (ok, stdout, stderr) = run_python(python, &script, args);
    assert!(ok, "the Python script failed (args {args:?}):\n{stderr}");
    stdout
}

use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Value,
};

/// Saves what LangGraph's quickstart graph (`START → get_address → END` over
/// a state `{name, address}`, the `a_one_node` fixture) saves for one
/// `invoke({"name": name})` on a new thread: an input checkpoint, the step-0
/// and step-1 checkpoints and the two tasks' writes, with the same channels,
/// versions, task paths and metadata. Returns the three configs.
pub async fn quickstart_run(saver: &dyn CheckpointSaver, thread: &str, name: &str) -> Vec<CheckpointConfig> {
    const BRANCH: &str = "branch:to:get_address";
    let next = |cp: &Checkpoint| {
        let max = cp
            .channel_versions
            .values()
            .max_by(|a, b| a.counter().cmp(&b.counter()))
            .cloned();
        saver.get_next_version(max.as_ref()).unwrap()
    };
    let seen = |pairs: &[(&str, &ChannelVersion)]| -> ChannelVersions {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).clone())).collect()
    };
    let mut out = Vec::new();

    // step -1: the input
    let mut cp = Checkpoint::new(-1);
    let v1 = next(&cp);
    cp.channel_values
        .insert("__start__".into(), Value::map([("name", Value::from(name))]));
    cp.channel_versions.insert("__start__".into(), v1.clone());
    cp.versions_seen.insert("__input__".into(), ChannelVersions::new());
    cp.updated_channels = Some(vec!["__start__".into()].into());
    let input = saver
        .put(
            &CheckpointConfig::new(thread),
            &cp,
            &CheckpointMetadata::new(CheckpointSource::Input, -1),
            &cp.channel_versions.clone(),
        )
        .await
        .unwrap();
    saver
        .put_writes(
            &input,
            &[("name".into(), Value::from(name)), (BRANCH.into(), Value::Nil)],
            &format!("{thread}-task-start"),
            "~__pregel_pull, __start__",
        )
        .await
        .unwrap();
    out.push(input.clone());

    // step 0: __start__ consumed, name and the branch written
    let v2 = next(&cp);
    let mut cp0 = Checkpoint::new(0);
    cp0.channel_values.insert("name".into(), Value::from(name));
    cp0.channel_values.insert(BRANCH.into(), Value::Nil);
    for ch in ["__start__", "name", BRANCH] {
        cp0.channel_versions.insert(ch.into(), v2.clone());
    }
    cp0.versions_seen.insert("__input__".into(), ChannelVersions::new());
    cp0.versions_seen
        .insert("__start__".into(), seen(&[("__start__", &v1)]));
    cp0.updated_channels = Some(vec![BRANCH.into(), "name".into()].into());
    let step0 = saver
        .put(
            &input,
            &cp0,
            &CheckpointMetadata::new(CheckpointSource::Loop, 0),
            &cp0.channel_versions.clone(),
        )
        .await
        .unwrap();
    let address = format!("123 Main St, home of {name}");
    saver
        .put_writes(
            &step0,
            &[("address".into(), Value::from(address.as_str()))],
            &format!("{thread}-task-get-address"),
            "~__pregel_pull, get_address",
        )
        .await
        .unwrap();
    out.push(step0.clone());

    // step 1: get_address ran
    let v3 = next(&cp0);
    let mut cp1 = Checkpoint::new(1);
    cp1.channel_values.insert("name".into(), Value::from(name));
    cp1.channel_values
        .insert("address".into(), Value::from(address.as_str()));
    cp1.channel_versions = cp0.channel_versions.clone();
    cp1.channel_versions.insert(BRANCH.into(), v3.clone());
    cp1.channel_versions.insert("address".into(), v3.clone());
    cp1.versions_seen = cp0.versions_seen.clone();
    cp1.versions_seen.insert("get_address".into(), seen(&[(BRANCH, &v2)]));
    cp1.updated_channels = Some(vec!["address".into()].into());
    let new_versions = seen(&[(BRANCH, &v3), ("address", &v3)]);
    let step1 = saver
        .put(
            &step0,
            &cp1,
            &CheckpointMetadata::new(CheckpointSource::Loop, 1),
            &new_versions,
        )
        .await
        .unwrap();
    out.push(step1);
    out
}

/// Writes everything of the SQLite file `source` into `target` through the
/// saver API (put, put_writes with the stored task paths), oldest checkpoint
/// first: what the crate stores for the same inputs Python received.
pub async fn replay(source: &Path, target: &dyn CheckpointSaver) {
    use checkpointer::serde::{JsonPlusSerializer, Serializer};
    use checkpointer::{CheckpointSaverExt, ListOptions};
    use std::collections::BTreeMap;

    let reader = checkpointer::sqlite::SqliteSaver::open(source).await.unwrap();
    let mut all = reader.list_vec(None, ListOptions::default()).await.unwrap();
    all.sort_by(|a, b| a.config.checkpoint_id.cmp(&b.config.checkpoint_id));
    for t in &all {
        let mut parent = CheckpointConfig::new(t.config.thread_id.clone()).with_ns(t.config.ns());
        if let Some(p) = &t.parent_config {
            parent = parent.with_checkpoint_id(p.checkpoint_id.clone().unwrap());
        }
        target
            .put(&parent, &t.checkpoint, &t.metadata, &t.checkpoint.channel_versions)
            .await
            .unwrap();
    }
    reader.close().await.unwrap();

    type Key = (String, String, String, String, String);
    let conn = rusqlite::Connection::open(source).unwrap();
    let mut groups: BTreeMap<Key, Vec<(i64, String, Value)>> = BTreeMap::new();
    let mut stmt = conn
        .prepare(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value FROM writes",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?),
                r.get::<_, i64>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, String>(7)?,
                r.get::<_, Vec<u8>>(8)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (key, idx, channel, tag, value) = row.unwrap();
        let value = JsonPlusSerializer.loads_typed(&tag, &value).unwrap();
        groups.entry(key).or_default().push((idx, channel, value));
    }
    for ((thread, ns, checkpoint_id, task_id, task_path), mut writes) in groups {
        // positions give the indexes back: regular writes in idx order
        // (0, 1, …), special channels (fixed negative idx) after them
        writes.sort_by_key(|(idx, _, _)| if *idx < 0 { i64::MAX + *idx } else { *idx });
        let regular: Vec<i64> = writes.iter().map(|w| w.0).filter(|i| *i >= 0).collect();
        assert_eq!(
            regular,
            (0..regular.len() as i64).collect::<Vec<_>>(),
            "indexes of {task_id}"
        );
        let list: Vec<(String, Value)> = writes.into_iter().map(|(_, ch, v)| (ch, v)).collect();
        let config = CheckpointConfig::new(thread)
            .with_ns(ns)
            .with_checkpoint_id(checkpoint_id);
        target.put_writes(&config, &list, &task_id, &task_path).await.unwrap();
    }
}

/// Every row of both tables, all columns as stored, in key order.
pub fn raw_rows(path: &Path) -> Vec<Vec<rusqlite::types::Value>> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT 'c', thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, \
         typeof(metadata) FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id",
        "SELECT 'w', thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value, \
         typeof(value) FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| (0..n).map(|i| r.get::<_, rusqlite::types::Value>(i)).collect())
            .unwrap();
        for row in rows {
            out.push(row.unwrap());
        }
    }
    out
}
