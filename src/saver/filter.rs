//! The metadata filter: JSON-value equality, maps by content.

use indexmap::IndexMap;

use crate::checkpoint::CheckpointMetadata;
use crate::serde::Value;

/// Whether `metadata` satisfies `filter`: every filter key's value equals the
/// metadata's value under (check `json_eq`); a `null` filter value also matches a
/// missing key.
pub fn metadata_matches(metadata: &CheckpointMetadata, filter: &IndexMap<String, Value>) -> bool {
    filter_matches(|key| metadata.get(key), filter)
}

/// [`metadata_matches`] on metadata looked up by `get`, for a saver that
/// filters stored metadata without building a [`CheckpointMetadata`].
pub(crate) fn filter_matches<'a>(get: impl Fn(&str) -> Option<&'a Value>, filter: &IndexMap<String, Value>) -> bool {
    filter.iter().all(|(key, want)| match get(key) {
        Some(have) => json_eq(have, want),
        None => matches!(want, Value::Nil),
    })
}

/// JSON-value equality: numbers by value (never equal to booleans), maps by
/// content regardless of key order, arrays element-wise.
///
/// Linear in the size of the values, plus O(n log n) to match the keys of
/// each map of more than a few entries; it walks without recursion, so any
/// depth is safe. Maps whose keys are themselves lists, maps or extension
/// values (which JSON never has) match those keys by a linear search.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    json_eq_at(a, b, 0)
}

/// Map keys that are lists or maps are compared by a nested [`json_eq_at`];
/// `key_depth` counts those nestings and stops them at the decoder's limit.
fn json_eq_at(a: &Value, b: &Value, key_depth: usize) -> bool {
    use Value::*;
    let mut stack: Vec<(&Value, &Value)> = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        match (a, b) {
            (Array(x), Array(y)) => {
                if x.len() != y.len() {
                    return false;
                }
                stack.extend(x.iter().zip(y.iter()));
            }
            (Map(x), Map(y)) => {
                if x.len() != y.len() || !match_entries(x, y, key_depth, &mut stack) {
                    return false;
                }
            }
            (Nil, Nil) => {}
            (Bool(x), Bool(y)) if x == y => {}
            (Str(x), Str(y)) if x == y => {}
            (Bin(x), Bin(y)) if x == y => {}
            (Ext(x), Ext(y)) if x == y => {}
            _ => match (a.as_number(), b.as_number()) {
                (Some(x), Some(y)) if x == y => {}
                _ => return false,
            },
        }
    }
    true
}

/// A map key as equality sees it, for the keys that have one (scalars).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum KeyForm<'a> {
    Nil,
    Bool(bool),
    /// The bits of the number as `f64`, `-0.0` as `0.0` (NaN has no form:
    /// it equals nothing).
    Number(u64),
    Str(&'a str),
    Bin(&'a [u8]),
}

fn key_form(key: &Value) -> Option<KeyForm<'_>> {
    Some(match key {
        Value::Nil => KeyForm::Nil,
        Value::Bool(b) => KeyForm::Bool(*b),
        Value::Str(s) => KeyForm::Str(s.as_str()),
        Value::Bin(b) => KeyForm::Bin(b),
        _ => match key.as_number() {
            Some(n) if n.is_nan() => return None,
            Some(n) => KeyForm::Number(if n == 0.0 { 0 } else { n.to_bits() }),
            None => return None,
        },
    })
}

/// Pairs each entry of `x` with the first entry of `y` whose key equals its
/// key, pushing the value pairs to compare; false when a key has no match.
fn match_entries<'a>(
    x: &'a [(Value, Value)],
    y: &'a [(Value, Value)],
    key_depth: usize,
    stack: &mut Vec<(&'a Value, &'a Value)>,
) -> bool {
    let composite_eq =
        |k: &Value, k2: &Value| key_depth < crate::serde::msgpack::MAX_DEPTH && json_eq_at(k, k2, key_depth + 1);
    if x.len() <= 8 {
        // A handful of entries: a scan is cheaper than an index.
        for (k, v) in x {
            let Some((_, v2)) = y.iter().find(|(k2, _)| match (key_form(k), key_form(k2)) {
                (Some(p), Some(q)) => p == q,
                _ => composite_eq(k, k2),
            }) else {
                return false;
            };
            stack.push((v, v2));
        }
        return true;
    }
    // The keys of `y` that have a form, sorted by it; among equal forms the
    // first entry in `y` comes first (a stable sort), as a scan would find it.
    let mut index: Vec<(KeyForm<'a>, usize)> = y
        .iter()
        .enumerate()
        .filter_map(|(i, (k, _))| key_form(k).map(|f| (f, i)))
        .collect();
    index.sort_by(|p, q| p.0.cmp(&q.0));
    for (k, v) in x {
        let found = match key_form(k) {
            Some(form) => {
                let at = index.partition_point(|(f, _)| *f < form);
                index.get(at).filter(|(f, _)| *f == form).map(|&(_, i)| i)
            }
            None => y
                .iter()
                .position(|(k2, _)| key_form(k2).is_none() && composite_eq(k, k2)),
        };
        let Some(i) = found else {
            return false;
        };
        stack.push((v, &y[i].1));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: Vec<(Value, Value)>) -> Value {
        Value::Map(entries.into())
    }

    #[test]
    fn json_eq_maps_by_content() {
        let keys = |n: usize, rev: bool| {
            let mut e: Vec<(Value, Value)> = (0..n)
                .map(|i| (Value::from(format!("k{i}")), Value::Int(i as i64)))
                .collect();
            if rev {
                e.reverse();
            }
            map(e)
        };
        for n in [0, 1, 8, 9, 20_000] {
            assert!(json_eq(&keys(n, false), &keys(n, true)), "{n}");
        }
        let mut changed = match keys(50, true) {
            Value::Map(m) => m.to_vec(),
            _ => unreachable!(),
        };
        changed[10].1 = Value::Int(-1);
        assert!(!json_eq(&keys(50, false), &map(changed)));
        // Numbers as keys compare by value, never equal booleans; NaN equals nothing.
        let numeric = |k: Value| {
            map((0..10)
                .map(|i| (Value::Int(i), Value::Nil))
                .chain([(k, Value::Nil)])
                .collect())
        };
        assert!(json_eq(&numeric(Value::Float(100.0)), &numeric(Value::Int(100))));
        assert!(json_eq(&numeric(Value::Float(-0.0)), &numeric(Value::UInt(0))));
        assert!(!json_eq(&numeric(Value::Bool(true)), &numeric(Value::Int(1))));
        assert!(!json_eq(
            &numeric(Value::Float(f64::NAN)),
            &numeric(Value::Float(f64::NAN))
        ));
        assert!(!json_eq(&numeric(Value::from("1")), &numeric(Value::Int(1))));
        // Composite keys match by content too.
        let composite = |rev: bool| {
            let mut e: Vec<(Value, Value)> = (0..12)
                .map(|i| (Value::Array(vec![Value::Int(i), keys(3, rev)].into()), Value::Int(i)))
                .collect();
            if rev {
                e.reverse();
            }
            map(e)
        };
        assert!(json_eq(&composite(false), &composite(true)));
        // A duplicate key pairs with its first occurrence, as a scan finds it.
        let dup = |first: i64| {
            map((0..10)
                .map(|i| (Value::from(format!("k{i}")), Value::Int(i)))
                .chain([(Value::from("k0"), Value::Int(first))])
                .collect())
        };
        assert!(json_eq(&dup(0), &dup(0)));
    }

    /// `Arc` and `Box` of a saver forward every method, the defaulted
    /// extended ones included (a wrapper relying on the defaults would
    /// answer `Unsupported`).
    #[test]
    fn json_eq_walks_any_depth_without_recursion() {
        let deep = |leaf: i64| (0..200_000).fold(Value::Int(leaf), |v, _| Value::Array(vec![v].into()));
        let (a, b, c) = (deep(1), deep(1), deep(2));
        assert!(json_eq(&a, &b));
        assert!(!json_eq(&a, &c));
        // Dropping values this deep recurses in `Drop`: leak them.
        std::mem::forget((a, b, c));
    }
}
