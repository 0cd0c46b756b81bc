//! Dropping, comparing and printing values nested without bound.
//!
//! A decoder never produces a value deeper than
//! [`MAX_DEPTH`](crate::serde::msgpack::MAX_DEPTH), but a program can build
//! one a million levels deep, and derived `Drop`, `PartialEq` and `Debug`
//! recurse once per level: that overflows any thread's stack. Here each
//! recurses for the first [`RECURSE`] levels (no allocation, as fast as the
//! derived code for everything a decoder produces) and then:
//! - dropping moves the nested lists, maps and extension values out to a heap
//!   stack and drops them one at a time;
//! - comparing goes on with a heap stack of pairs;
//! - `Debug` writes `…` for what lies deeper than [`DEBUG_DEPTH`] levels.

use std::cell::Cell;
use std::fmt;

use super::{Ext, ExtPayload, Value};
use crate::serde::msgpack::MAX_DEPTH;

/// Levels of drop or comparison done by recursion before the heap takes over.
const RECURSE: usize = 64;

/// Levels `Debug` prints: every value a decoder accepts, in full.
const DEBUG_DEPTH: usize = MAX_DEPTH + 1;

thread_local! {
    /// How many drops of lists, maps and extensions are running on this thread, nested.
    static DROP_DEPTH: Cell<usize> = const { Cell::new(0) };
    /// How many `Value::fmt` calls are running on this thread, nested.
    static DEBUG_LEVEL: Cell<usize> = const { Cell::new(0) };
}

fn is_container(v: &Value) -> bool {
    matches!(v, Value::Array(_) | Value::Map(_) | Value::Ext(_))
}

/// Something holding values whose nested containers can be moved out.
pub(super) trait Detach {
    /// Moves every list, map and extension value directly inside out to
    /// `out` (leaving `Nil`), where this holder owns them alone.
    fn detach(&mut self, out: &mut Vec<Value>);
}

impl Detach for [Value] {
    fn detach(&mut self, out: &mut Vec<Value>) {
        for v in self {
            if is_container(v) {
                out.push(std::mem::take(v));
            }
        }
    }
}

impl Detach for [(Value, Value)] {
    fn detach(&mut self, out: &mut Vec<Value>) {
        for (k, v) in self {
            for x in [k, v] {
                if is_container(x) {
                    out.push(std::mem::take(x));
                }
            }
        }
    }
}

impl Detach for Value {
    fn detach(&mut self, out: &mut Vec<Value>) {
        match self {
            // A shared list is not this value's to empty: dropping it only
            // lowers its count.
            Value::Array(items) => {
                if let Some(items) = items.unique_mut() {
                    items.detach(out);
                }
            }
            Value::Map(entries) => {
                if let Some(entries) = entries.unique_mut() {
                    entries.detach(out);
                }
            }
            Value::Ext(ext) => {
                if let ExtPayload::Decoded(inner) = &mut ext.payload {
                    if is_container(inner) {
                        out.push(std::mem::take(&mut **inner));
                    }
                }
            }
            _ => {}
        }
    }
}

/// Drops `children` with `drop_them`, the last step of dropping the list,
/// map or extension holding them: by recursion within [`RECURSE`] nested
/// drops, else after moving their nested containers out to a heap stack,
/// dropped one by one here (each shallow by then).
pub(super) fn drop_bounded<C: Detach + ?Sized>(children: &mut C, drop_them: impl FnOnce(&mut C)) {
    let depth = DROP_DEPTH.get();
    if depth < RECURSE {
        DROP_DEPTH.set(depth + 1);
        drop_them(children);
        DROP_DEPTH.set(depth);
        return;
    }
    // The counter stays at RECURSE meanwhile: the drops below come back here
    // and find nothing nested to move.
    let mut stack = Vec::new();
    children.detach(&mut stack);
    drop_them(children);
    while let Some(mut v) = stack.pop() {
        v.detach(&mut stack);
    }
}

/// An extension's payload is a value: a chain of snapshots of snapshots
/// would recurse through it.
impl Drop for Ext {
    fn drop(&mut self) {
        if let ExtPayload::Decoded(inner) = &mut self.payload {
            if is_container(inner) {
                drop_bounded(&mut **inner, |v| *v = Value::Nil);
            }
        }
    }
}

/// Compares the top level of `a` and `b`, calling `children` on each pair
/// of elements (keys and values, extension payloads) while it answers true.
fn shallow_eq<'a>(a: &'a Value, b: &'a Value, mut children: impl FnMut(&'a Value, &'a Value) -> bool) -> bool {
    use Value::*;
    match (a, b) {
        (Nil, Nil) => true,
        (Bool(x), Bool(y)) => x == y,
        (Int(x), Int(y)) => x == y,
        (UInt(x), UInt(y)) => x == y,
        (F32(x), F32(y)) => x == y,
        (Float(x), Float(y)) => x == y,
        (Str(x), Str(y)) => x == y,
        (Bin(x), Bin(y)) => x == y,
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| children(p, q)),
        (Map(x), Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((k, v), (k2, v2))| children(k, k2) && children(v, v2))
        }
        (Ext(x), Ext(y)) => {
            x.code == y.code
                && match (&x.payload, &y.payload) {
                    (ExtPayload::Decoded(p), ExtPayload::Decoded(q)) => children(p, q),
                    (ExtPayload::Raw(p), ExtPayload::Raw(q)) => p == q,
                    _ => false,
                }
        }
        _ => false,
    }
}

fn eq_at(a: &Value, b: &Value, depth: usize) -> bool {
    shallow_eq(a, b, |p, q| {
        if depth < RECURSE {
            eq_at(p, q, depth + 1)
        } else {
            eq_by_stack(p, q)
        }
    })
}

fn eq_by_stack<'a>(a: &'a Value, b: &'a Value) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        if !shallow_eq(a, b, |p, q| {
            stack.push((p, q));
            true
        }) {
            return false;
        }
    }
    true
}

/// Structural equality, as derived: variant by variant (`Int(1) != UInt(1)`),
/// element by element, a NaN unequal to itself.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        eq_at(self, other, 0)
    }
}

/// Lowers [`DEBUG_LEVEL`] again however the formatting ends.
struct Level(usize);

impl Drop for Level {
    fn drop(&mut self) {
        DEBUG_LEVEL.set(self.0);
    }
}

/// The derived format (`Array([Int(1), Str("a")])`, `{:#?}` indented), with
/// what lies deeper than [`MAX_DEPTH`] levels written `…`.
impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = DEBUG_LEVEL.get();
        if level >= DEBUG_DEPTH {
            return f.write_str("…");
        }
        DEBUG_LEVEL.set(level + 1);
        let _restore = Level(level);
        match self {
            Value::Nil => f.write_str("Nil"),
            Value::Bool(b) => f.debug_tuple("Bool").field(b).finish(),
            Value::Int(i) => f.debug_tuple("Int").field(i).finish(),
            Value::UInt(u) => f.debug_tuple("UInt").field(u).finish(),
            Value::F32(x) => f.debug_tuple("F32").field(x).finish(),
            Value::Float(x) => f.debug_tuple("Float").field(x).finish(),
            Value::Str(s) => f.debug_tuple("Str").field(s).finish(),
            Value::Bin(b) => f.debug_tuple("Bin").field(b).finish(),
            Value::Array(items) => f.debug_tuple("Array").field(items).finish(),
            Value::Map(entries) => f.debug_tuple("Map").field(entries).finish(),
            Value::Ext(ext) => f.debug_tuple("Ext").field(ext).finish(),
        }
    }
}
