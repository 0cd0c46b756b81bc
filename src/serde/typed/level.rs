//! Nesting bounds: the bridge refuses what the msgpack decoder would.

use std::cell::Cell;

use super::error::{BResult, BridgeError};
use crate::serde::msgpack_codec::MAX_DEPTH;

/// The most nested calls the bridge makes into one value, counting `Option`s
/// and newtypes, which add no msgpack level: a type nesting through them
/// alone is bounded too, and up to three of them per array or map level fit.
const MAX_CALLS: usize = 4 * MAX_DEPTH;

/// Where the bridge is in the value it builds or reads: `depth` arrays, maps
/// and extension values around it (counted as the msgpack encoder counts
/// them, so the bridge refuses exactly what the decoder would), after `calls`
/// nested calls.
#[derive(Clone, Copy)]
pub(super) struct Level {
    depth: usize,
    calls: usize,
}

fn too_deep() -> BridgeError {
    BridgeError::new(format!(
        "value nests deeper than the limit of {MAX_DEPTH} arrays, maps and extension values"
    ))
}

impl Level {
    pub(super) const TOP: Level = Level { depth: 0, calls: 0 };

    /// The level of the elements of a container found at this level.
    pub(super) fn container(self) -> BResult<Level> {
        if self.depth >= MAX_DEPTH {
            return Err(too_deep());
        }
        Ok(Level {
            depth: self.depth + 1,
            calls: self.call()?,
        })
    }

    /// The level of a value wrapped at this one (`Some`, a newtype).
    pub(super) fn wrapped(self) -> BResult<Level> {
        Ok(Level {
            depth: self.depth,
            calls: self.call()?,
        })
    }

    fn call(self) -> BResult<usize> {
        if self.calls >= MAX_CALLS {
            return Err(BridgeError::new(format!(
                "value nests deeper than the limit of {MAX_DEPTH}: more than {MAX_CALLS} nested \
                 containers, options and newtypes"
            )));
        }
        Ok(self.calls + 1)
    }
}

thread_local! {
    /// How many arrays, maps and extension values `Value`'s own `Serialize`
    /// and `Deserialize` are inside on this thread, whatever the format.
    static VALUE_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// One level of [`VALUE_DEPTH`], left when dropped (also on an error or a
/// panic).
pub(super) struct ValueLevel;

impl ValueLevel {
    /// Enters a level, or the reason when that would nest deeper than
    /// [`MAX_DEPTH`].
    pub(super) fn enter() -> std::result::Result<ValueLevel, String> {
        VALUE_DEPTH.with(|d| {
            let depth = d.get();
            if depth >= MAX_DEPTH {
                return Err(format!("value nests deeper than the limit of {MAX_DEPTH}"));
            }
            d.set(depth + 1);
            Ok(ValueLevel)
        })
    }
}

impl Drop for ValueLevel {
    fn drop(&mut self) {
        VALUE_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}
