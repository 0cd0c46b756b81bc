//! Compatibility with the real Python package, both directions.
//! Needs the peer venv: `CHECKPOINTER_PYTHON=$(scripts/python-venv.sh)`.
//! Without it the tests are reported ignored; in CI (`CI=true`) they fail.
//!
//! * Python's `SqliteSaver` (through `read_fixtures.py`) reads databases the
//!   crate wrote, without error and with the values the crate wrote;
//! * Python's runtime continues a thread the crate started, and the crate
//!   reads the result.

use crate::harness;
use crate::sqlite_support;

use std::path::Path;

use bytes::Bytes;
use checkpointer::checkpoint::NULL_TASK_ID;
use checkpointer::serde::{render, Ext, ExtKind};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, ListOptions, Value,
};

fn read_fixtures(testdata: &Path) -> std::path::PathBuf {
    testdata.join("peer").join("read_fixtures.py")
}

/// Runs `read_fixtures.py [--normalize] db` and returns its JSON; fails the
/// test when Python reports an error.
fn python_dump(python: &Path, testdata: &Path, db: &Path, normalize: bool) -> serde_json::Value {
    let mut args = vec![];
    if normalize {
        args.push("--normalize");
    }
    let db = db.to_str().unwrap();
    args.push(db);
    let (ok, stdout, stderr) = sqlite_support::run_python(python, &read_fixtures(testdata), &args);
    assert!(ok, "Python could not read {db}:\n{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// (b) Every fixture scenario written by the crate (a quickstart run, a
/// reducer, a subgraph namespace, messages) reads in Python exactly as the
/// file Python wrote: the dumps are equal, ids and all.
async fn python_reads_what_the_crate_wrote_for_every_fixture() {
    let testdata = sqlite_support::testdata_dir();
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    for (name, path) in sqlite_support::fixtures(&testdata) {
        let (_dir, copy) = sqlite_support::temp_copy(&path);
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join(&name);
        let target = SqliteSaver::open(&out).await.unwrap();
        sqlite_support::replay(&copy, &target).await;
        target.close().await.unwrap();
        let got = python_dump(&python, &testdata, &out, false);
        let expected: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(path.with_file_name(name.replace(".sqlite", ".expected.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(got, expected, "{name}");
    }
}

/// (b) A run of the quickstart graph by the crate (fresh ids, versions and
/// timestamps) is, for Python, the same history LangGraph itself writes: the
/// normalized dump equals the fixture's.
async fn python_reads_a_quickstart_run_as_langgraph_writes_it() {
    let testdata = sqlite_support::testdata_dir();
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a_one_node.sqlite");
    let saver = SqliteSaver::open(&db).await.unwrap();
    sqlite_support::quickstart_run(&saver, "12345", "Alice").await;
    saver.close().await.unwrap();
    let got = python_dump(&python, &testdata, &db, true);
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(testdata.join("fixtures").join("a_one_node.normalized.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(got, expected);
}

fn obj(kind: ExtKind, module: &str, name: &str, arg: Value) -> Value {
    Value::Ext(Box::new(Ext::object(kind, module, name, arg).unwrap()))
}

fn message(class: &str, module: &str, fields: Vec<(&str, Value)>) -> Value {
    Value::Ext(Box::new(
        Ext::object_with_method(
            ExtKind::PydanticV2,
            format!("langchain_core.messages.{module}"),
            class,
            Value::map(fields),
            "model_validate_json",
        )
        .unwrap(),
    ))
}

fn rich_values() -> Vec<(&'static str, Value)> {
    let human = message(
        "HumanMessage",
        "human",
        vec![
            ("content", Value::from("Quelle heure est-il ? 🕰")),
            ("additional_kwargs", Value::Map(vec![].into())),
            ("response_metadata", Value::Map(vec![].into())),
            ("type", Value::from("human")),
            ("name", Value::Nil),
            ("id", Value::from("human-1")),
        ],
    );
    let ai = message(
        "AIMessage",
        "ai",
        vec![
            ("content", Value::from("")),
            ("additional_kwargs", Value::Map(vec![].into())),
            ("response_metadata", Value::Map(vec![].into())),
            ("type", Value::from("ai")),
            ("name", Value::Nil),
            ("id", Value::from("ai-1")),
            (
                "tool_calls",
                Value::Array(
                    (vec![Value::map([
                        ("name", Value::from("clock")),
                        ("args", Value::map([("tz", Value::from("Europe/Paris"))])),
                        ("id", Value::from("call-1")),
                        ("type", Value::from("tool_call")),
                    ])])
                    .into(),
                ),
            ),
            ("invalid_tool_calls", Value::Array(vec![].into())),
            ("usage_metadata", Value::Nil),
        ],
    );
    let datetime = Value::Ext(Box::new(
        Ext::object_with_method(
            ExtKind::MethodSingleArg,
            "datetime",
            "datetime",
            Value::from("2024-01-02T03:04:05.000678+00:00"),
            "fromisoformat",
        )
        .unwrap(),
    ));
    vec![
        ("messages", Value::Array(vec![human, ai].into())),
        ("when", datetime),
        (
            "day",
            obj(
                ExtKind::ConstructorPosArgs,
                "datetime",
                "date",
                Value::from(vec![2024, 2, 29]),
            ),
        ),
        (
            "id",
            obj(
                ExtKind::ConstructorSingleArg,
                "uuid",
                "UUID",
                Value::from("12345678123456781234567812345678"),
            ),
        ),
        (
            "price",
            obj(ExtKind::ConstructorSingleArg, "decimal", "Decimal", Value::from("1.10")),
        ),
        (
            "tags",
            obj(
                ExtKind::ConstructorSingleArg,
                "builtins",
                "set",
                Value::from(vec!["a", "b"]),
            ),
        ),
        ("raw", Value::Bin(Bytes::from_static(b"\x00\xffbytes"))),
        (
            "nested",
            Value::Map(
                (vec![
                    (Value::Int(1), Value::from("int key")),
                    (
                        Value::from("list"),
                        Value::Array(vec![Value::Nil, Value::Bool(true), Value::Float(0.1)].into()),
                    ),
                    (Value::from("big"), Value::UInt(u64::MAX)),
                    (Value::from("neg"), Value::Int(-40000)),
                    (Value::from("nan"), Value::Float(f64::NAN)),
                ])
                .into(),
            ),
        ),
        (
            "__pregel_tasks",
            Value::Array(
                (vec![obj(
                    ExtKind::ConstructorPosArgs,
                    "langgraph.types",
                    "Send",
                    Value::Array((vec![Value::from("worker"), Value::map([("x", Value::Int(0))])]).into()),
                )])
                .into(),
            ),
        ),
        ("log", Value::delta_snapshot(Value::from(vec!["in", "n1"]))),
        ("empty", Value::Nil),
    ]
}

/// (b) A thread with a subgraph namespace, pending writes on special
/// channels, datetimes, messages and other Python types: Python reads it
/// without error, and what it reads is what the crate reads.
async fn python_reads_namespaces_special_writes_and_python_types() {
    let testdata = sqlite_support::testdata_dir();
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rich.sqlite");
    let saver = SqliteSaver::open(&db).await.unwrap();

    let mut root = Checkpoint::new(0);
    for (ch, value) in rich_values() {
        let version = saver.get_next_version(None).unwrap();
        root.channel_values.insert(ch.into(), value);
        root.channel_versions.insert(ch.into(), version);
    }
    let mut metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    metadata.insert("run_id", "run-1");
    metadata.insert("note", "naïve \"quote\" \u{1}");
    metadata.insert("score", Value::Float(0.5));
    let root_cfg = saver
        .put(
            &CheckpointConfig::new("rich"),
            &root,
            &metadata,
            &root.channel_versions.clone(),
        )
        .await
        .unwrap();
    let interrupt = obj(
        ExtKind::ConstructorKwArgs,
        "langgraph.types",
        "Interrupt",
        Value::map([
            ("value", Value::from("question?")),
            ("id", Value::from("int-1")),
            ("response_schema", Value::Nil),
        ]),
    );
    saver
        .put_writes(
            &root_cfg,
            &[("__resume__".into(), Value::from("yes"))],
            NULL_TASK_ID,
            "",
        )
        .await
        .unwrap();
    saver
        .put_writes(
            &root_cfg,
            &[
                ("__resume__".into(), Value::from(vec!["yes"])),
                ("__interrupt__".into(), Value::Array(vec![interrupt].into())),
                ("items".into(), Value::from(vec!["yes"])),
                ("__error__".into(), Value::from("ValueError('boom')")),
            ],
            "ask-task",
            "~__pregel_pull, ask",
        )
        .await
        .unwrap();

    let child_ns = "child:3dad8c10-2692-f41f-69ba-4ffb93f90bd7";
    let mut parent = CheckpointConfig::new("rich").with_ns(child_ns);
    for step in -1..=1 {
        let mut cp = Checkpoint::new(step);
        cp.channel_values.insert("step".into(), Value::from(step));
        let mut md = CheckpointMetadata::new(
            if step < 0 {
                CheckpointSource::Input
            } else {
                CheckpointSource::Loop
            },
            step,
        );
        md.insert("parents", Value::map([("", Value::from(root.id.as_str()))]));
        parent = saver.put(&parent, &cp, &md, &ChannelVersions::new()).await.unwrap();
        saver
            .put_writes(
                &parent,
                &[("step".into(), Value::from(step + 1))],
                "child-task",
                "~__pregel_pull, inner",
            )
            .await
            .unwrap();
    }
    let ours = render::dump(&saver, "rich.sqlite").await.unwrap();
    saver.close().await.unwrap();
    assert_eq!(ours["errors"], serde_json::json!([]));

    let theirs = python_dump(&python, &testdata, &db, false);
    assert_eq!(theirs, ours);
    // and the values are the ones written, not just equal renderings
    let cp = &theirs["threads"][0]["namespaces"][0]["checkpoints"][0];
    assert_eq!(
        cp["checkpoint"]["channel_values"]["when"]["iso"],
        "2024-01-02T03:04:05.000678+00:00"
    );
    assert_eq!(
        cp["checkpoint"]["channel_values"]["messages"][0]["__type__"],
        "langchain_core.messages.human.HumanMessage"
    );
    assert_eq!(cp["pending_writes"][0][0], NULL_TASK_ID);
    assert_eq!(cp["pending_writes"][0][2], "yes");
}

/// (c) Python's runtime continues a thread the crate started: LangGraph
/// loads the crate's latest checkpoint, runs the graph on new input and
/// saves on top of it; the crate reads the result.
async fn python_continues_a_thread_the_crate_started() {
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("continue.sqlite");
    let saver = SqliteSaver::open(&db).await.unwrap();
    let ours = sqlite_support::quickstart_run(&saver, "t-1", "Alice").await;
    let our_latest = ours.last().unwrap().checkpoint_id.clone().unwrap();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/sqlite_python_continue.py");
    let (ok, stdout, stderr) = sqlite_support::run_python(&python, &script, &[db.to_str().unwrap(), "t-1", "Bob"]);
    assert!(ok, "Python failed to continue the thread:\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    // Python saw the crate's state
    assert_eq!(report["before_id"], our_latest.as_str());
    assert_eq!(
        report["before"],
        serde_json::json!({"name": "Alice", "address": "123 Main St, home of Alice"})
    );
    assert_eq!(report["before_next"], serde_json::json!([]));
    assert_eq!(
        report["result"],
        serde_json::json!({"name": "Bob", "address": "123 Main St, home of Bob"})
    );

    // the crate reads what Python added, on top of its own history
    let latest = saver.latest("t-1").await.unwrap().unwrap();
    assert_eq!(
        Some(latest.config.checkpoint_id.clone().unwrap()),
        report["history"][0].as_str().map(str::to_owned)
    );
    assert_eq!(latest.checkpoint.channel_values["name"], Value::from("Bob"));
    assert_eq!(
        latest.checkpoint.channel_values["address"],
        Value::from("123 Main St, home of Bob")
    );
    assert_eq!(latest.metadata.step(), Some(4));
    let history = saver
        .list_vec(Some(CheckpointConfig::new("t-1")), ListOptions::default())
        .await
        .unwrap();
    let ids: Vec<String> = history
        .iter()
        .map(|t| t.config.checkpoint_id.clone().unwrap())
        .collect();
    let python_ids: Vec<String> = report["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, python_ids, "both read the same history");
    assert_eq!(ids.len(), 6);
    // Python's first checkpoint has the crate's latest as parent
    let python_input = &history[2];
    assert_eq!(
        python_input.parent_config.as_ref().unwrap().checkpoint_id.as_deref(),
        Some(our_latest.as_str())
    );
    assert_eq!(python_input.metadata.source(), Some(CheckpointSource::Input));
    // Python's writes read back too
    let python_step = &history[1];
    assert!(python_step
        .pending_writes
        .iter()
        .any(|w| w.channel == "address" && w.value == Value::from("123 Main St, home of Bob")));
    saver.close().await.unwrap();
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "sqlite::python_reads_what_the_crate_wrote_for_every_fixture",
            &[&crate::PYTHON],
            2,
            python_reads_what_the_crate_wrote_for_every_fixture,
        ),
        harness::tokio(
            "sqlite::python_reads_a_quickstart_run_as_langgraph_writes_it",
            &[&crate::PYTHON],
            2,
            python_reads_a_quickstart_run_as_langgraph_writes_it,
        ),
        harness::tokio(
            "sqlite::python_reads_namespaces_special_writes_and_python_types",
            &[&crate::PYTHON],
            2,
            python_reads_namespaces_special_writes_and_python_types,
        ),
        harness::tokio(
            "sqlite::python_continues_a_thread_the_crate_started",
            &[&crate::PYTHON],
            2,
            python_continues_a_thread_the_crate_started,
        ),
    ]
}
