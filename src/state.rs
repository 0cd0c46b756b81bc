//! A typed graph state and the channels LangGraph stores it in.
//!
//! A LangGraph `StateGraph` keeps one channel per field of its state (a
//! `TypedDict`'s keys, a dataclass's fields) next to channels of its own:
//! the input channel `__start__`, the edge triggers `branch:to:<node>`,
//! `join:…` barriers, `__pregel_tasks` and the like. This module converts a
//! Rust struct to and from the field channels, and turns a partial update
//! into the writes a node stores:
//!
//! - [`to_channels`]: a whole state, one `(channel, value)` per field;
//! - [`from_channels`]: the state back from a checkpoint's values, the
//!   runtime's own channels skipped;
//! - [`writes`]: the writes of a partial update, one per field it sets.
//!
//! ```
//! use checkpointer::prelude::*;
//! use checkpointer::state;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct State {
//!     messages: Vec<String>,
//!     #[serde(default)]
//!     summary: Option<String>,
//! }
//!
//! /// What one node returns: only the fields it sets.
//! #[derive(Serialize, Default)]
//! struct Update {
//!     #[serde(skip_serializing_if = "Option::is_none")]
//!     messages: Option<Vec<String>>,
//!     #[serde(skip_serializing_if = "Option::is_none")]
//!     summary: Option<String>,
//! }
//!
//! let mut values = ChannelValues::new();
//! for (channel, value) in state::to_channels(&State { messages: vec!["hi".into()], summary: None })? {
//!     values.insert(channel, value);
//! }
//! values.insert("branch:to:agent".to_owned(), Value::Nil); // the runtime's own channel
//! let read: State = state::from_channels(&values)?;
//! assert_eq!(read.messages, ["hi"]);
//!
//! let update = Update { summary: Some("a greeting".into()), ..Update::default() };
//! assert_eq!(state::writes(&update)?, [("summary".to_owned(), Value::from("a greeting"))]);
//! # Ok::<(), checkpointer::Error>(())
//! ```

use ::serde::de::DeserializeOwned;
use ::serde::Serialize;

use crate::checkpoint::ChannelValues;
use crate::error::{Error, Result};
use crate::serde::{from_value, to_value, Value};

/// Prefixes of the channels LangGraph's runtime keeps for itself: edge
/// triggers (`branch:to:agent`), join barriers (`join:a+b:c`) and the
/// trigger channels of LangGraph before 0.4 (`start:agent`, `agent:inbox`
/// style names all contain a colon).
const RUNTIME_PREFIXES: [&str; 3] = ["branch:", "join:", "start:"];

/// Whether `channel` belongs to the runtime rather than to the state:
/// `__start__`, `__pregel_tasks` and every other dunder name, and the edge
/// and barrier channels (`branch:to:…`, `join:…`, `start:…`).
///
/// ```
/// use checkpointer::state::is_runtime_channel;
/// assert!(is_runtime_channel("__start__"));
/// assert!(is_runtime_channel("branch:to:agent"));
/// assert!(!is_runtime_channel("messages"));
/// ```
pub fn is_runtime_channel(channel: &str) -> bool {
    channel.starts_with("__") || RUNTIME_PREFIXES.iter().any(|p| channel.starts_with(p))
}

/// The channels of a whole state: one `(field, value)` per entry the state
/// serializes to, in field order.
///
/// # Errors
/// [`Error::Serde`] when the state does not serialize; [`Error::InvalidInput`]
/// when it is not a struct or map with string keys, or a field is named like
/// a runtime channel ([`is_runtime_channel`]); both name the field.
pub fn to_channels<S: Serialize + ?Sized>(state: &S) -> Result<Vec<(String, Value)>> {
    fields_of(state, "state")
}

/// The writes of a partial update: one `(field, value)` per entry the update
/// serializes to. Fields the update leaves out are not written; give an
/// update type `#[serde(skip_serializing_if = "Option::is_none")]` on its
/// optional fields, since `None` serializes as a real nil (LangGraph's
/// `None`, a value like any other).
///
/// # Errors
/// As [`to_channels`].
pub fn writes<U: Serialize + ?Sized>(update: &U) -> Result<Vec<(String, Value)>> {
    fields_of(update, "update")
}

/// Reads a state from a checkpoint's channel values, skipping the runtime's
/// channels ([`is_runtime_channel`]). A field whose channel has no value is
/// absent: give it `#[serde(default)]` when that can happen (LangGraph drops
/// a channel's value until something writes it).
///
/// # Errors
/// [`Error::Serde`] when a channel does not have the shape its field needs;
/// the reason names the field and the path inside it
/// (`` at `messages[2].role`: ... ``) or the missing field.
pub fn from_channels<S: DeserializeOwned>(values: &ChannelValues) -> Result<S> {
    let map = Value::map(
        values
            .iter()
            .filter(|(channel, _)| !is_runtime_channel(channel))
            .map(|(channel, value)| (channel.as_str(), value.clone())),
    );
    from_value(map).map_err(|e| match e {
        Error::Serde { reason } => Error::Serde {
            reason: format!("reading the state from its channels: {reason}"),
        },
        other => other,
    })
}

fn fields_of<S: Serialize + ?Sized>(value: &S, what: &str) -> Result<Vec<(String, Value)>> {
    let entries = match to_value(value)? {
        Value::Map(entries) => entries,
        other => {
            return Err(Error::InvalidInput {
                reason: format!(
                    "a {what} must serialize to a struct or map of channels, not {}",
                    kind(&other)
                ),
            })
        }
    };
    let mut out = Vec::with_capacity(entries.len());
    for (key, value) in entries.iter() {
        let Some(name) = key.as_str() else {
            return Err(Error::InvalidInput {
                reason: format!("a {what}'s keys must be strings (channel names), found {}", kind(key)),
            });
        };
        if is_runtime_channel(name) {
            return Err(Error::InvalidInput {
                reason: format!("{what} field `{name}` is named like a runtime channel"),
            });
        }
        out.push((name.to_owned(), value.clone()));
    }
    Ok(out)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Bool(_) => "a boolean",
        Value::Int(_) | Value::UInt(_) => "an integer",
        Value::Float(_) | Value::F32(_) => "a float",
        Value::Str(_) => "a string",
        Value::Bin(_) => "bytes",
        Value::Array(_) => "a sequence",
        Value::Map(_) => "a map",
        _ => "an extension value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Msg {
        role: String,
        content: String,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct State {
        messages: Vec<Msg>,
        #[serde(default)]
        turns: u32,
    }

    fn values(entries: Vec<(String, Value)>) -> ChannelValues {
        let mut v = ChannelValues::new();
        for (k, x) in entries {
            v.insert(k, x);
        }
        v
    }

    #[test]
    fn round_trip_skips_runtime_channels() {
        let s = State {
            messages: vec![Msg {
                role: "user".into(),
                content: "hi".into(),
            }],
            turns: 2,
        };
        let mut chans = to_channels(&s).unwrap();
        assert_eq!(
            chans.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["messages", "turns"]
        );
        chans.push(("__start__".into(), Value::map([("messages", Value::from(1))])));
        chans.push(("branch:to:agent".into(), Value::Nil));
        chans.push(("join:a+b:c".into(), Value::from(vec!["a"])));
        assert_eq!(from_channels::<State>(&values(chans)).unwrap(), s);
    }

    #[test]
    fn missing_channel_uses_the_default() {
        let v = values(vec![("messages".into(), Value::from(Vec::<Value>::new()))]);
        assert_eq!(from_channels::<State>(&v).unwrap().turns, 0);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = values(vec![(
            "messages".into(),
            Value::from(vec![Value::map([
                ("role", Value::from(1)),
                ("content", Value::from("x")),
            ])]),
        )]);
        let err = from_channels::<State>(&bad).unwrap_err().to_string();
        assert!(err.contains("messages[0].role"), "{err}");
        let missing = from_channels::<State>(&ChannelValues::new()).unwrap_err().to_string();
        assert!(missing.contains("messages"), "{missing}");
    }

    #[test]
    fn bad_shapes_are_refused_with_typed_errors() {
        assert!(matches!(to_channels(&[1, 2]), Err(Error::InvalidInput { .. })));
        assert!(matches!(writes(&5), Err(Error::InvalidInput { .. })));
        let mut m = std::collections::BTreeMap::new();
        m.insert("branch:to:x", 1);
        let err = writes(&m).unwrap_err();
        assert!(err.to_string().contains("`branch:to:x`"), "{err}");
        let mut ints = std::collections::BTreeMap::new();
        ints.insert(1, 1);
        assert!(matches!(writes(&ints), Err(Error::InvalidInput { .. })));
    }

    #[test]
    fn partial_update_writes_only_what_it_sets() {
        #[derive(Serialize)]
        struct Update {
            #[serde(skip_serializing_if = "Option::is_none")]
            messages: Option<Vec<Msg>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            turns: Option<u32>,
        }
        let w = writes(&Update {
            messages: None,
            turns: Some(3),
        })
        .unwrap();
        assert_eq!(w, [("turns".to_owned(), Value::from(3))]);
    }
}
