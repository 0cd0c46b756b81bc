//! Reducers: how a write to a state field combines with the field's value.
//!
//! A LangGraph state field annotated with a reducer (`Annotated[list,
//! operator.add]`, `Annotated[list, add_messages]`) keeps the result of
//! `reducer(current, written)` instead of the written value. [`Reducers`]
//! holds one reducer per field, each written over the field's own Rust type:
//! the stored values are converted in and out, and a value that does not
//! convert, or a reducer that fails, is a typed error naming the field
//! ([`StepError::Reducer`]).
//!
//! Stock reducers: [`append`] (Python's `operator.add` on lists) and
//! [`add_messages`] (LangGraph's `add_messages`: merge by message id, remove
//! with [`RemoveMessage`](crate::serde::py::Message::remove) markers).
//!
//! ```
//! use checkpointer::prelude::*;
//! use checkpointer::reducer::{append, Reducers};
//!
//! let reducers = Reducers::new()
//!     .field("log", append::<String>)
//!     .field("count", |old: i64, add: i64| Ok(old + add));
//! let log = reducers.reduce("log", Some(&Value::from(vec!["a"])), Value::from(vec!["b"]))?;
//! assert_eq!(log, Value::from(vec!["a", "b"]));
//! // a field without a value starts from its type's default
//! assert_eq!(reducers.reduce("count", None, Value::from(2))?, Value::from(2));
//! // fields without a reducer take the written value
//! assert_eq!(reducers.reduce("topic", Some(&Value::from("a")), Value::from("b"))?, Value::from("b"));
//! // a write of the wrong shape is a typed error naming the field
//! let err = reducers.reduce("count", None, Value::from("two")).unwrap_err();
//! assert!(matches!(err.as_step(), Some(checkpointer::step::StepError::Reducer { channel, .. }) if channel == "count"));
//! # Ok::<(), checkpointer::Error>(())
//! ```

use std::fmt;
use std::sync::Arc;

use ::serde::de::DeserializeOwned;
use ::serde::Serialize;

use crate::checkpoint::ChannelValues;
use crate::error::{Error, Result};
use crate::serde::py::{Message, MessageKind};
use crate::serde::{from_value, from_value_ref, to_value, Value};
use crate::state::is_runtime_channel;
use crate::step::StepError;

/// The id of the [`RemoveMessage`](crate::serde::py::Message::remove) that
/// makes [`add_messages`] drop every message before it (LangGraph's
/// `REMOVE_ALL_MESSAGES`).
pub const REMOVE_ALL_MESSAGES: &str = "__remove_all__";

type ReduceFn = dyn Fn(Option<&Value>, Value) -> Result<Value> + Send + Sync;

/// One reducer per state field; fields without one keep the last value
/// written. Cheap to clone.
#[derive(Clone, Default)]
pub struct Reducers {
    fields: Vec<(String, Arc<ReduceFn>)>,
}

impl fmt::Debug for Reducers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.fields.iter().map(|(c, _)| c)).finish()
    }
}

impl Reducers {
    /// No reducers: every field keeps the last value written.
    pub fn new() -> Self {
        Reducers::default()
    }

    /// Field `channel` reduced by `reduce(current, written)`, over the
    /// field's type `T` and the written type `U`. A field without a value
    /// starts from `T::default()` (as LangGraph's `BinaryOperatorAggregate`
    /// starts from the empty list, 0, …). Replaces an earlier reducer of the
    /// same field.
    #[must_use]
    pub fn field<T, U, F>(self, channel: impl Into<String>, reduce: F) -> Self
    where
        T: Serialize + DeserializeOwned + Default + 'static,
        U: DeserializeOwned + 'static,
        F: Fn(T, U) -> Result<T> + Send + Sync + 'static,
    {
        self.raw(channel, move |old, new| {
            let old: T = match old {
                None | Some(Value::Nil) => T::default(),
                Some(v) => from_value_ref(v)?,
            };
            to_value(&reduce(old, from_value(new)?)?)
        })
    }

    /// Field `channel` reduced by LangGraph's `add_messages` over messages of
    /// type `M`; a single message written is merged as a list of one, as
    /// Python does.
    #[must_use]
    pub fn messages<M>(self, channel: impl Into<String>) -> Self
    where
        M: MessageLike + Serialize + DeserializeOwned + 'static,
    {
        self.raw(channel, |old, new| {
            let current: Vec<M> = match old {
                None | Some(Value::Nil) => Vec::new(),
                Some(v) => from_value_ref(v)?,
            };
            let written: Vec<M> = match new {
                Value::Array(_) => from_value(new)?,
                one => vec![from_value(one)?],
            };
            to_value(&add_messages(current, written)?)
        })
    }

    /// Field `channel` reduced over untyped values.
    #[must_use]
    pub fn raw(
        mut self,
        channel: impl Into<String>,
        reduce: impl Fn(Option<&Value>, Value) -> Result<Value> + Send + Sync + 'static,
    ) -> Self {
        let channel = channel.into();
        self.fields.retain(|(c, _)| *c != channel);
        self.fields.push((channel, Arc::new(reduce)));
        self
    }

    /// The channel values after `writes`, each through its field's reducer
    /// (the runtime's channels, such as `branch:to:…`, are skipped): the
    /// state a node's conditional edge routes on, its own writes applied.
    ///
    /// # Errors
    /// As [`Reducers::reduce`].
    pub fn apply(&self, values: &ChannelValues, writes: &[(String, Value)]) -> Result<ChannelValues> {
        let mut after = values.clone();
        for (channel, value) in writes.iter().filter(|(c, _)| !is_runtime_channel(c)) {
            let new = self.reduce(channel, after.get(channel), value.clone())?;
            after.insert(channel.clone(), new);
        }
        Ok(after)
    }

    /// Whether `channel` has a reducer.
    pub fn has(&self, channel: &str) -> bool {
        self.fields.iter().any(|(c, _)| c == channel)
    }

    /// The value of `channel` after `written` is written to it, its current
    /// value being `old`.
    ///
    /// # Errors
    /// [`Error::Step`] with [`StepError::Reducer`] naming the channel when a
    /// value does not convert to the field's type or the reducer fails.
    pub fn reduce(&self, channel: &str, old: Option<&Value>, written: Value) -> Result<Value> {
        match self.fields.iter().find(|(c, _)| c == channel) {
            None => Ok(written),
            Some((_, reduce)) => reduce(old, written).map_err(|e| match e.as_step() {
                Some(StepError::Reducer { .. }) => e,
                _ => StepError::Reducer {
                    channel: channel.to_owned(),
                    reason: e.to_string(),
                }
                .into(),
            }),
        }
    }
}

/// Python's `operator.add` on lists: the written items after the current
/// ones.
///
/// ```
/// assert_eq!(checkpointer::reducer::append(vec![1], vec![2, 3])?, [1, 2, 3]);
/// # Ok::<(), checkpointer::Error>(())
/// ```
///
/// # Errors
/// Never; fallible to fit [`Reducers::field`].
pub fn append<E>(mut current: Vec<E>, written: Vec<E>) -> Result<Vec<E>> {
    current.extend(written);
    Ok(current)
}

/// A chat message as [`add_messages`] sees it: an optional id, and whether
/// it is a removal marker (LangChain's `RemoveMessage`).
pub trait MessageLike {
    /// The message id, if it has one.
    fn id(&self) -> Option<&str>;
    /// Gives the message an id (a message merged without one gets a new
    /// UUID v4, as in Python).
    fn set_id(&mut self, id: String);
    /// Whether the message is a `RemoveMessage`: it removes the message of
    /// its id instead of being added.
    fn is_removal(&self) -> bool {
        false
    }
}

impl MessageLike for Message {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
    fn set_id(&mut self, id: String) {
        self.id = Some(id);
    }
    fn is_removal(&self) -> bool {
        self.kind == MessageKind::Remove
    }
}

/// LangGraph's `add_messages`, with the same result as Python's on the same
/// messages: a written message whose id is already there replaces it in
/// place, others are appended, a removal marker removes the message of its
/// id, and one whose id is [`REMOVE_ALL_MESSAGES`] drops everything before
/// it (the result is what follows the last such marker). Messages without an
/// id get a new UUID v4 first.
///
/// ```
/// use checkpointer::reducer::add_messages;
/// use checkpointer::serde::py::Message;
///
/// let current = vec![Message::human("hi").with_id("1"), Message::ai("hello").with_id("2")];
/// let written = vec![Message::ai("hello!").with_id("2"), Message::remove("1"), Message::human("bye").with_id("3")];
/// let merged = add_messages(current, written)?;
/// let texts: Vec<_> = merged.iter().map(|m| m.text().unwrap()).collect();
/// assert_eq!(texts, ["hello!", "bye"]);
/// assert!(add_messages(merged, vec![Message::remove("9")]).is_err()); // no message 9
/// # Ok::<(), checkpointer::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidInput`] for a removal marker whose id is not among the
/// messages (as Python's `ValueError`).
pub fn add_messages<M: MessageLike>(mut current: Vec<M>, mut written: Vec<M>) -> Result<Vec<M>> {
    for m in current.iter_mut().chain(written.iter_mut()) {
        if m.id().is_none() {
            m.set_id(new_message_id());
        }
    }
    let remove_all = written
        .iter()
        .rposition(|m| m.is_removal() && m.id() == Some(REMOVE_ALL_MESSAGES));
    if let Some(at) = remove_all {
        return Ok(written.split_off(at + 1));
    }
    let mut index: std::collections::HashMap<String, usize> = current
        .iter()
        .enumerate()
        .filter_map(|(i, m)| Some((m.id()?.to_owned(), i)))
        .collect();
    let mut removed: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut merged: Vec<Option<M>> = current.into_iter().map(Some).collect();
    for m in written {
        let id = m.id().unwrap_or_default().to_owned();
        match index.get(&id) {
            Some(_) if m.is_removal() => {
                removed.insert(id);
            }
            Some(&at) => {
                removed.remove(&id);
                merged[at] = Some(m);
            }
            None if m.is_removal() => {
                return Err(Error::invalid(format!(
                    "add_messages: attempting to delete a message with an ID that doesn't exist ({id:?})"
                )))
            }
            None => {
                index.insert(id, merged.len());
                merged.push(Some(m));
            }
        }
    }
    Ok(merged
        .into_iter()
        .flatten()
        .filter(|m| m.id().is_none_or(|id| !removed.contains(id)))
        .collect())
}

/// A random (version 4) UUID, as Python's `str(uuid.uuid4())`.
fn new_message_id() -> String {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ms: &[Message]) -> Vec<&str> {
        ms.iter().map(|m| m.id.as_deref().unwrap_or("")).collect()
    }

    #[test]
    fn add_messages_replaces_in_place_and_removes() {
        let cur = vec![Message::human("a").with_id("1"), Message::ai("b").with_id("2")];
        // removed, then written again: kept, with the new value, in place
        let out = add_messages(
            cur.clone(),
            vec![Message::remove("1"), Message::human("a2").with_id("1")],
        )
        .unwrap();
        assert_eq!(ids(&out), ["1", "2"]);
        assert_eq!(out[0].text(), Some("a2"));
        // a message written and removed in the same update
        let out = add_messages(cur.clone(), vec![Message::ai("c").with_id("3"), Message::remove("3")]).unwrap();
        assert_eq!(ids(&out), ["1", "2"]);
        // remove all keeps what follows the last marker
        let out = add_messages(
            cur,
            vec![
                Message::remove(REMOVE_ALL_MESSAGES),
                Message::ai("x").with_id("x"),
                Message::remove(REMOVE_ALL_MESSAGES),
                Message::ai("y").with_id("y"),
            ],
        )
        .unwrap();
        assert_eq!(ids(&out), ["y"]);
    }

    #[test]
    fn messages_without_ids_get_uuid4s() {
        let out = add_messages(vec![Message::human("a")], vec![Message::ai("b")]).unwrap();
        for m in &out {
            let id = uuid::Uuid::parse_str(m.id.as_deref().unwrap()).unwrap();
            assert_eq!(id.get_version_num(), 4);
        }
        assert_ne!(out[0].id, out[1].id);
    }

    #[test]
    fn reducer_errors_name_the_channel() {
        let r = Reducers::new().messages::<Message>("messages");
        let err = r
            .reduce("messages", None, Message::remove("nope").to_value())
            .unwrap_err();
        match err.as_step() {
            Some(StepError::Reducer { channel, reason }) => {
                assert_eq!(channel, "messages");
                assert!(reason.contains("nope"), "{reason}");
            }
            _ => panic!("{err}"),
        }
        let one = r
            .reduce("messages", None, Message::human("hi").with_id("1").to_value())
            .unwrap();
        assert_eq!(one.as_array().map(|a| a.len()), Some(1));
    }
}
