//! `get_next_version` against LangGraph's own, on the same inputs: for a
//! few thousand version strings (whitespace, signs, underscores, digits of
//! other scripts, long and odd counters), the crate continues exactly where
//! Python's `InMemorySaver.get_next_version` continues and refuses exactly
//! what Python raises on, plus what Python would number below the current
//! version (which it does not notice).

use checkpointer::version::{next_version, python_int, ChannelVersion};
use rand::{Rng, SeedableRng};

use crate::{harness, sqlite_support};

const PYTHON_NEXT: &str = r#"
import json, sys
from langgraph.checkpoint.memory import InMemorySaver
saver = InMemorySaver()
out = []
for current in json.load(sys.stdin):
    try:
        out.append(saver.get_next_version(current, None).split(".")[0])
    except Exception as e:
        out.append(None)
json.dump(out, sys.stdout)
"#;

/// Pieces version strings are made of: what Python's `int()` accepts
/// around and between digits, and what it refuses.
const PIECES: &[&str] = &[
    "0",
    "1",
    "7",
    "9",
    "00000000000000000000000000000",
    "12",
    "_",
    "__",
    "+",
    "-",
    " ",
    "\t",
    "\n",
    "\u{a0}",
    "\u{3000}",
    "\u{2007}",
    "\u{1c}",
    "\u{0661}",
    "\u{0663}",
    "\u{06f5}",
    "\u{ff19}",
    "\u{1d7ce}",
    "\u{11f50}",
    "x",
    "e",
    "٫",
    ".",
    "\u{feff}",
    "99999999999999999999999999999999",
    "½",
    "²",
];

fn candidates(n: usize) -> Vec<String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(28);
    let mut out: Vec<String> = [
        "1_000.5",
        "+7.5",
        " 7.5",
        "\u{0661}\u{0663}.5",
        "00000000000000000000000000000007.0.5",
        "99999999999999999999999999999999.0.1",
        "-0000000000000000000000000000005.0.5",
        "-0.5",
        "",
        ".5",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    out.push("1".repeat(4300));
    out.push("1".repeat(4301));
    out.push(format!("+{}", "0".repeat(4300)));
    const SPACES: &[&str] = &["", " ", "\t", "\u{a0}", "\u{3000}"];
    const DIGITS: &[&str] = &[
        "0",
        "1",
        "7",
        "9",
        "12",
        "\u{0661}",
        "\u{06f5}",
        "\u{ff19}",
        "\u{1d7ce}",
        "0000000000000000000000000000",
    ];
    let pick = |rng: &mut rand::rngs::StdRng, from: &[&'static str]| from[rng.random_range(0..from.len())];
    while out.len() < n {
        let mut s = String::new();
        if rng.random_bool(0.5) {
            // what int() reads: spaces, a sign, digits with single underscores
            s.push_str(pick(&mut rng, SPACES));
            s.push_str(pick(&mut rng, &["", "", "+", "-"]));
            for i in 0..rng.random_range(1..5) {
                if i > 0 && rng.random_bool(0.3) {
                    s.push('_');
                }
                s.push_str(pick(&mut rng, DIGITS));
            }
            s.push_str(pick(&mut rng, SPACES));
        } else {
            let len = rng.random_range(1..8);
            s = (0..len).map(|_| pick(&mut rng, PIECES)).collect();
        }
        if rng.random_bool(0.5) {
            s.push_str(".0.5");
        }
        out.push(s);
    }
    out
}

fn python_get_next_version_agrees() {
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    let inputs = candidates(5000);
    let mut child = std::process::Command::new(python)
        .args(["-c", PYTHON_NEXT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    serde_json::to_writer(stdin, &inputs).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let heads: Vec<Option<String>> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(heads.len(), inputs.len());
    let (mut continued, mut raised, mut below) = (0, 0, 0);
    for (current, python) in inputs.iter().zip(heads) {
        let head = current.split('.').next().unwrap();
        assert_eq!(python_int(head).is_some(), python.is_some(), "int({head:?})");
        let ours = next_version(Some(&ChannelVersion::from(current.as_str())));
        match (python, ours) {
            (None, Err(_)) => raised += 1,
            // Python numbered it, but below the current version: refused
            (Some(p), Err(_)) if p.as_str() < current.as_str() => below += 1,
            (Some(p), Ok(v)) => {
                assert_eq!(v.to_string().split('.').next().unwrap(), p, "{current:?}");
                assert!(v > ChannelVersion::from(current.as_str()));
                continued += 1;
            }
            (python, ours) => panic!("{current:?}: Python {python:?}, ours {ours:?}"),
        }
    }
    // every case is exercised
    assert!(
        continued > 300 && raised > 300 && below > 300,
        "{continued} {raised} {below}"
    );
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::test(
        "versions::python_get_next_version_agrees",
        &[&crate::PYTHON],
        python_get_next_version_agrees,
    )]
}
