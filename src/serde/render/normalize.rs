//! `read_fixtures.py --normalize`: run-specific strings of a dump replaced
//! by aliases, so that dumps of two runs compare equal.

use serde_json::{json, Map};

use super::python_json;
use crate::error::Result;
use crate::serde::msgpack::MAX_DEPTH;

/// The aliases `--normalize` gives run-specific strings.
#[derive(Default)]
struct Aliases {
    /// Every checkpoint id (an alias once its namespace is reached), task
    /// id and interrupt id seen so far.
    map: std::collections::HashMap<String, Option<String>>,
    counters: std::collections::HashMap<&'static str, usize>,
}

impl Aliases {
    fn get(&mut self, kind: &'static str, value: &str) -> Option<String> {
        if !self.map.contains_key(value) {
            let n = self.counters.entry(kind).or_insert(0);
            self.map.insert(value.to_owned(), Some(format!("<{kind}{n}>")));
            *n += 1;
        }
        self.map.get(value).cloned().flatten()
    }

    fn walk(&mut self, v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::String(s) => match self.map.get(s) {
                Some(Some(alias)) => json!(alias),
                _ => v.clone(),
            },
            serde_json::Value::Array(items) => serde_json::Value::Array(items.iter().map(|x| self.walk(x)).collect()),
            serde_json::Value::Object(m) => {
                if let (Some(t @ serde_json::Value::String(ty)), Some(serde_json::Value::Object(data))) =
                    (m.get("__type__"), m.get("data"))
                {
                    if ty == "langgraph.types.Interrupt" {
                        let mut data = data.clone();
                        if let Some(serde_json::Value::String(id)) = data.get("id") {
                            let alias = self.get("I", &id.clone()).map_or(serde_json::Value::Null, |a| json!(a));
                            data.insert("id".into(), alias);
                        }
                        let data = self.walk(&serde_json::Value::Object(data));
                        return json!({"__type__": t, "data": data});
                    }
                }
                serde_json::Value::Object(m.iter().map(|(k, x)| (k.clone(), self.walk(x))).collect())
            }
            other => other.clone(),
        }
    }
}

/// The integer part of a LangGraph version string (`"0…02.0.123"` → 2), as
/// `--normalize` keeps it; anything else unchanged.
fn version_part(v: &serde_json::Value) -> serde_json::Value {
    fn digits(s: &str) -> bool {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    }
    // `^(\d+)\.(\d+(\.\d+)?(e-?\d+)?)$`
    fn fraction(s: &str) -> bool {
        let (mantissa, exponent) = match s.split_once('e') {
            Some((m, e)) => (m, Some(e.strip_prefix('-').unwrap_or(e))),
            None => (s, None),
        };
        let mantissa_ok = match mantissa.split_once('.') {
            Some((a, b)) => digits(a) && digits(b),
            None => digits(mantissa),
        };
        mantissa_ok && exponent.is_none_or(digits)
    }
    if let serde_json::Value::String(s) = v {
        if let Some((int, rest)) = s.split_once('.') {
            if digits(int) && fraction(rest) {
                if let Ok(n) = int.parse::<u64>() {
                    return json!(n);
                }
            }
        }
    }
    v.clone()
}

fn versions_part(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            serde_json::Value::Object(m.iter().map(|(k, x)| (k.clone(), version_part(x))).collect())
        }
        other => other.clone(),
    }
}

fn field<'v>(v: &'v serde_json::Value, key: &str) -> Result<&'v serde_json::Value> {
    v.get(key)
        .ok_or_else(|| crate::Error::invalid(format!("not a dump: no {key:?} field")))
}

fn items<'v>(v: &'v serde_json::Value, key: &str) -> Result<&'v [serde_json::Value]> {
    field(v, key)?
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| crate::Error::invalid(format!("not a dump: {key:?} is not a list")))
}

fn text<'v>(v: &'v serde_json::Value, key: &str) -> Result<&'v str> {
    field(v, key)?
        .as_str()
        .ok_or_else(|| crate::Error::invalid(format!("not a dump: {key:?} is not a string")))
}

/// The deepest nesting of lists and objects [`normalize`] accepts in a dump.
/// A [`dump`](super::dump) holds values rendered from what the decoder accepts
/// ([`MAX_DEPTH`] levels, and one more for `{"__bytes__": …}`) nine levels
/// down (dump, threads, thread, namespaces, namespace, checkpoints,
/// checkpoint, its fields, `channel_values`), within this limit.
pub const MAX_DUMP_DEPTH: usize = MAX_DEPTH + 16;

/// Whether `v` nests at most `limit` lists and objects, found without
/// recursion.
fn nests_within(v: &serde_json::Value, limit: usize) -> bool {
    let mut todo = vec![(v, 0usize)];
    while let Some((v, depth)) = todo.pop() {
        match v {
            serde_json::Value::Array(items) if !items.is_empty() => {
                if depth >= limit {
                    return false;
                }
                todo.extend(items.iter().map(|x| (x, depth + 1)));
            }
            serde_json::Value::Object(m) if !m.is_empty() => {
                if depth >= limit {
                    return false;
                }
                todo.extend(m.values().map(|x| (x, depth + 1)));
            }
            _ => {}
        }
    }
    true
}

/// What `read_fixtures.py --normalize` makes of a [`dump`](super::dump): checkpoint ids
/// become `<thread/ns#i>` (oldest first per namespace), task ids `<Tn>`
/// (namespace segments first, then pending writes, in dump order) and
/// interrupt ids `<In>` wherever they occur as strings; timestamps become
/// `<ts>`; versions keep their integer part; `updated_channels` is sorted and
/// each task's pending writes are ordered by channel (stable, tasks in the
/// saver's order). The result has `"normalized": true`.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) when `dump` does not
/// have the shape [`dump`](super::dump) produces; [`Error::Serde`](crate::Error::Serde)
/// when it nests deeper than [`MAX_DUMP_DEPTH`] (checked first, without
/// recursion, so that the walks below stay bounded).
pub fn normalize(dump: &serde_json::Value) -> Result<serde_json::Value> {
    use crate::checkpoint::NULL_TASK_ID;

    if !nests_within(dump, MAX_DUMP_DEPTH) {
        return Err(crate::Error::serde(format!(
            "the dump nests deeper than the limit of {MAX_DUMP_DEPTH} lists and objects"
        )));
    }

    let mut al = Aliases::default();
    let threads = items(dump, "threads")?;
    for th in threads {
        for ns in items(th, "namespaces")? {
            for cp in items(ns, "checkpoints")? {
                al.map.insert(text(cp, "checkpoint_id")?.to_owned(), None);
            }
        }
    }
    let mut ns_aliases: Vec<Vec<String>> = Vec::new();
    for th in threads {
        let thread_id = text(th, "thread_id")?;
        let mut aliases = Vec::new();
        for ns in items(th, "namespaces")? {
            let name = text(ns, "checkpoint_ns")?;
            let mut parts = Vec::new();
            if !name.is_empty() {
                for seg in name.split('|') {
                    match seg.split_once(':') {
                        Some((node, tid)) if !tid.is_empty() => {
                            let alias = al.get("T", tid).unwrap_or_else(|| "None".to_owned());
                            parts.push(format!("{node}:{alias}"));
                        }
                        _ => parts.push(seg.to_owned()),
                    }
                }
            }
            let alias = parts.join("|");
            for (i, cp) in items(ns, "checkpoints")?.iter().enumerate() {
                al.map.insert(
                    text(cp, "checkpoint_id")?.to_owned(),
                    Some(format!("<{thread_id}/{alias}#{i}>")),
                );
            }
            aliases.push(alias);
        }
        ns_aliases.push(aliases);
    }
    for th in threads {
        for ns in items(th, "namespaces")? {
            for cp in items(ns, "checkpoints")? {
                for w in items(cp, "pending_writes")? {
                    if let Some(task) = w.get(0).and_then(serde_json::Value::as_str) {
                        if task != NULL_TASK_ID {
                            al.get("T", task);
                        }
                    }
                }
            }
        }
    }

    let mut out_threads = Vec::new();
    for (th, aliases) in threads.iter().zip(ns_aliases) {
        let mut nss = Vec::new();
        for (ns, alias) in items(th, "namespaces")?.iter().zip(aliases) {
            let mut cps = Vec::new();
            for cp in items(ns, "checkpoints")? {
                let c = field(cp, "checkpoint")?;
                let id_alias = al.map.get(text(cp, "checkpoint_id")?).cloned().flatten();
                let parent = al.walk(field(cp, "parent_checkpoint_id")?);
                let mut checkpoint = Map::new();
                checkpoint.insert("v".into(), field(c, "v")?.clone());
                checkpoint.insert("id".into(), al.walk(field(c, "id")?));
                checkpoint.insert("ts".into(), json!("<ts>"));
                checkpoint.insert("channel_values".into(), al.walk(field(c, "channel_values")?));
                checkpoint.insert("channel_versions".into(), versions_part(field(c, "channel_versions")?));
                let seen = match field(c, "versions_seen")? {
                    serde_json::Value::Object(m) => {
                        serde_json::Value::Object(m.iter().map(|(k, x)| (k.clone(), versions_part(x))).collect())
                    }
                    other => other.clone(),
                };
                checkpoint.insert("versions_seen".into(), seen);
                let updated = match field(c, "updated_channels")? {
                    serde_json::Value::Array(list) => {
                        let mut list = list.clone();
                        list.sort_by(|a, b| match (a.as_str(), b.as_str()) {
                            (Some(a), Some(b)) => a.cmp(b),
                            _ => python_json(a).cmp(&python_json(b)),
                        });
                        serde_json::Value::Array(list)
                    }
                    other => other.clone(),
                };
                checkpoint.insert("updated_channels".into(), updated);
                if let Some(sends) = c.get("pending_sends") {
                    checkpoint.insert("pending_sends".into(), al.walk(sends));
                }
                let metadata = al.walk(field(cp, "metadata")?);
                let mut writes = Vec::new();
                for w in items(cp, "pending_writes")? {
                    let w = w.as_array().filter(|w| w.len() == 3).ok_or_else(|| {
                        crate::Error::invalid("not a dump: a pending write is not [task, channel, value]")
                    })?;
                    writes.push(vec![al.walk(&w[0]), w[1].clone(), al.walk(&w[2])]);
                }
                // tasks rank by their first write; one hash lookup per write
                // (a task that is not a string, which no dump holds, is
                // known by its JSON text)
                let mut first: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
                let mut ranked: Vec<(usize, Vec<serde_json::Value>)> = Vec::with_capacity(writes.len());
                for w in writes {
                    let task = match &w[0] {
                        serde_json::Value::String(s) => format!("s{s}"),
                        other => format!("j{}", python_json(other)),
                    };
                    let next = first.len();
                    let rank = *first.entry(task).or_insert(next);
                    ranked.push((rank, w));
                }
                ranked.sort_by(|(ra, a), (rb, b)| {
                    ra.cmp(rb)
                        .then_with(|| a[1].as_str().unwrap_or("").cmp(b[1].as_str().unwrap_or("")))
                });
                let writes: Vec<Vec<serde_json::Value>> = ranked.into_iter().map(|(_, w)| w).collect();
                cps.push(json!({
                    "checkpoint_id": id_alias,
                    "parent_checkpoint_id": parent,
                    "checkpoint": checkpoint,
                    "metadata": metadata,
                    "pending_writes": writes,
                }));
            }
            let latest = al.walk(field(ns, "latest_checkpoint_id")?);
            nss.push(json!({"checkpoint_ns": alias, "latest_checkpoint_id": latest, "checkpoints": cps}));
        }
        out_threads.push(json!({"thread_id": field(th, "thread_id")?, "namespaces": nss}));
    }
    let mut out = dump
        .as_object()
        .cloned()
        .ok_or_else(|| crate::Error::invalid("not a dump: not an object"))?;
    out.insert("normalized".into(), json!(true));
    out.insert("threads".into(), serde_json::Value::Array(out_threads));
    Ok(serde_json::Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_aliases_as_read_fixtures_does() {
        let cp = |id: &str, parent: serde_json::Value, writes: serde_json::Value| {
            json!({
                "checkpoint_id": id,
                "parent_checkpoint_id": parent,
                "checkpoint": {
                    "v": 4, "id": id, "ts": "2024-01-01T00:00:00+00:00",
                    "channel_values": {
                        "x": {"__type__": "langgraph.types.Interrupt", "data": {"value": "ask", "id": "int-9"}},
                        "ref": "task-b",
                    },
                    "channel_versions": {"x": "00000000000000000000000000000002.0.5", "y": "0000000001.5e-05", "z": 3, "w": "1.2.3.4"},
                    "versions_seen": {"n": {"x": "00000000000000000000000000000001.0.25"}},
                    "updated_channels": ["y", "x"],
                },
                "metadata": {"parents": {"": id}},
                "pending_writes": writes,
            })
        };
        let dump = json!({
            "source": "s.sqlite",
            "summary": {},
            "errors": [],
            "threads": [{"thread_id": "t", "namespaces": [
                {"checkpoint_ns": "", "latest_checkpoint_id": "c2", "checkpoints": [
                    cp("c1", json!(null), json!([
                        ["task-b", "z", 1], ["task-a", "b", 2], ["task-b", "a", 3],
                        ["00000000-0000-0000-0000-000000000000", "a", 4],
                    ])),
                    cp("c2", json!("c1"), json!([])),
                ]},
                {"checkpoint_ns": "child:task-c|inner", "latest_checkpoint_id": "c3", "checkpoints": [
                    cp("c3", json!(null), json!([])),
                ]},
            ]}],
        });
        let n = normalize(&dump).unwrap();
        assert_eq!(n["normalized"], json!(true));
        let ns = &n["threads"][0]["namespaces"];
        assert_eq!(ns[1]["checkpoint_ns"], "child:<T0>|inner");
        assert_eq!(ns[1]["latest_checkpoint_id"], "<t/child:<T0>|inner#0>");
        let c1 = &ns[0]["checkpoints"][0];
        assert_eq!(c1["checkpoint_id"], "<t/#0>");
        assert_eq!(ns[0]["checkpoints"][1]["parent_checkpoint_id"], "<t/#0>");
        assert_eq!(c1["checkpoint"]["ts"], "<ts>");
        assert_eq!(
            c1["checkpoint"]["channel_versions"],
            json!({"x": 2, "y": 1, "z": 3, "w": "1.2.3.4"})
        );
        assert_eq!(c1["checkpoint"]["versions_seen"], json!({"n": {"x": 1}}));
        assert_eq!(c1["checkpoint"]["updated_channels"], json!(["x", "y"]));
        assert_eq!(c1["metadata"], json!({"parents": {"": "<t/#0>"}}));
        // task ids in write order; interrupts numbered as the walk meets them
        assert_eq!(c1["checkpoint"]["channel_values"]["ref"], "<T1>");
        assert_eq!(
            c1["checkpoint"]["channel_values"]["x"],
            json!({"__type__": "langgraph.types.Interrupt", "data": {"value": "ask", "id": "<I0>"}})
        );
        // tasks keep their order, each task's writes by channel
        assert_eq!(
            c1["pending_writes"],
            json!([
                ["<T1>", "a", 3],
                ["<T1>", "z", 1],
                ["<T2>", "b", 2],
                ["00000000-0000-0000-0000-000000000000", "a", 4],
            ])
        );
        assert!(normalize(&json!({"threads": 1})).is_err());
    }
}
