//! [`StepCheckpoint`]: the checkpoint a super-step makes from its parent.

use std::sync::Arc;

use super::{ChannelVersions, Checkpoint, CHECKPOINT_VERSION};
use crate::serde::Value;
use crate::version::ChannelVersion;

/// The checkpoint a super-step is building, and the channel versions it has
/// bumped so far: what [`CheckpointSaver::put`](crate::CheckpointSaver::put)
/// takes as `checkpoint` and `new_versions`.
///
/// Start from the parent with [`Checkpoint::successor`] (or from nothing
/// with [`StepCheckpoint::first`]): the new checkpoint gets a fresh id and
/// timestamp and shares every map with the parent, so nothing is copied
/// until a channel changes. Each [`write`](StepCheckpoint::write) or
/// [`bump`](StepCheckpoint::bump) takes the channel's next version from
/// `next_version` (pass the saver's
/// [`get_next_version`](crate::CheckpointSaver::get_next_version)) and
/// records it in `channel_versions` and in `new_versions`; a write also
/// names the channel in `updated_channels` (sorted, each channel once), as
/// LangGraph's runtime does. LangGraph gives every channel a step changes one
/// version, the next after [`Checkpoint::max_version`]: pass a closure that
/// returns it to get the same.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::{
///     CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, InMemorySaver, StepCheckpoint,
/// };
/// let saver = InMemorySaver::new();
/// let next = |v: Option<&_>| saver.get_next_version(v);
///
/// let mut input = StepCheckpoint::first(-1);
/// input.write("__start__", "hello", next);
/// let config = CheckpointConfig::new("thread-1");
/// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
/// let config = saver.put(&config, &input.checkpoint, &meta, &input.new_versions).await?;
///
/// // The next step: the input channel is consumed (bumped, no value) and
/// // the node's output written.
/// let mut step = input.checkpoint.successor(0);
/// step.bump("__start__", next).write("greeting", "hello, world", next);
/// step.mark_seen("greeter", &["__start__"]);
/// assert_eq!(step.new_versions.len(), 2);
/// // the consumed input is bumped, not listed as updated
/// assert_eq!(step.checkpoint.updated_channels.as_deref(), Some(&["greeting".to_owned()][..]));
/// assert!(step.checkpoint.channel_versions["__start__"] > input.checkpoint.channel_versions["__start__"]);
/// let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
/// saver.put(&config, &step.checkpoint, &meta, &step.new_versions).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct StepCheckpoint {
    /// The checkpoint being built.
    pub checkpoint: Checkpoint,
    /// The versions this step gave its channels: `put`'s `new_versions`.
    pub new_versions: ChannelVersions,
}

impl Checkpoint {
    /// The checkpoint that follows this one at `step`: a fresh id (clock
    /// sequence = `step`, so ids stay increasing within a process) and the
    /// current time, the same channel values, versions and versions seen
    /// (shared: nothing is copied until a channel changes), format version 4,
    /// and no `updated_channels` until the step writes one. LangGraph's
    /// `create_checkpoint` plays this part in Python.
    ///
    /// ```
    /// use checkpointer::{Checkpoint, Value};
    /// let mut parent = Checkpoint::new(0);
    /// parent.channel_values.insert("n".to_owned(), Value::from(1));
    /// let next = parent.successor(1);
    /// assert!(next.checkpoint.id > parent.id);
    /// assert!(next.checkpoint.channel_values.ptr_eq(&parent.channel_values));
    /// assert!(next.new_versions.is_empty());
    /// ```
    pub fn successor(&self, step: i64) -> StepCheckpoint {
        StepCheckpoint {
            checkpoint: Checkpoint {
                v: CHECKPOINT_VERSION,
                id: crate::id::checkpoint_id(step),
                ts: crate::id::now_iso(),
                updated_channels: None,
                pending_sends: None,
                ..self.clone()
            },
            new_versions: ChannelVersions::new(),
        }
    }
}

impl StepCheckpoint {
    /// The first checkpoint of a thread (LangGraph's input checkpoint is at
    /// step −1): empty, with a fresh id and the current time.
    pub fn first(step: i64) -> Self {
        StepCheckpoint {
            checkpoint: Checkpoint::new(step),
            new_versions: ChannelVersions::new(),
        }
    }

    /// Sets `channel`'s value and gives it its next version.
    pub fn write(
        &mut self,
        channel: &str,
        value: impl Into<Value>,
        next_version: impl Fn(Option<&ChannelVersion>) -> ChannelVersion,
    ) -> &mut Self {
        self.checkpoint.channel_values.insert(channel.to_owned(), value.into());
        self.next_version_of(channel, next_version);
        self
    }

    /// Gives `channel` its next version without a value, and removes the
    /// value it had: what a consumed trigger (`__start__`, `branch:to:…`)
    /// looks like after the step that read it. A bump is not a write: the
    /// channel is not added to `updated_channels` (Python lists only the
    /// channels a step's writes updated there). The bump is a new version,
    /// so code comparing versions to decide what runs must compare against
    /// `versions_seen` (see [`StepCheckpoint::mark_seen`]), not look for a
    /// value.
    pub fn bump(
        &mut self,
        channel: &str,
        next_version: impl Fn(Option<&ChannelVersion>) -> ChannelVersion,
    ) -> &mut Self {
        if self.checkpoint.channel_values.contains_key(channel) && !self.new_versions.contains_key(channel) {
            // consumed: a bump without a write in this step drops the old value
            self.checkpoint.channel_values.shift_remove(channel);
        }
        let version = next_version(self.checkpoint.channel_versions.get(channel));
        self.checkpoint
            .channel_versions
            .insert(channel.to_owned(), version.clone());
        self.new_versions.insert(channel.to_owned(), version);
        self
    }

    /// Gives `channel` its next version, in `channel_versions`,
    /// `new_versions` and `updated_channels`.
    fn next_version_of(&mut self, channel: &str, next_version: impl Fn(Option<&ChannelVersion>) -> ChannelVersion) {
        let version = next_version(self.checkpoint.channel_versions.get(channel));
        self.checkpoint
            .channel_versions
            .insert(channel.to_owned(), version.clone());
        self.new_versions.insert(channel.to_owned(), version);
        let mut updated: Vec<String> = self.checkpoint.updated_channels.as_deref().unwrap_or_default().to_vec();
        if let Err(at) = updated.binary_search_by(|c| c.as_str().cmp(channel)) {
            updated.insert(at, channel.to_owned());
        }
        self.checkpoint.updated_channels = Some(Arc::from(updated));
    }

    /// Records that `node` ran having seen the current versions of
    /// `channels` (`versions_seen[node]`), so a later step knows which of
    /// its triggers are new.
    pub fn mark_seen(&mut self, node: &str, channels: &[&str]) -> &mut Self {
        let mut seen = self.checkpoint.versions_seen.get(node).cloned().unwrap_or_default();
        for ch in channels {
            if let Some(v) = self.checkpoint.channel_versions.get(*ch) {
                seen.insert((*ch).to_owned(), v.clone());
            }
        }
        self.checkpoint.versions_seen.insert(node.to_owned(), seen);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::next_version;

    #[test]
    fn write_then_bump_keeps_the_written_value() {
        let mut s = StepCheckpoint::first(0);
        s.write("a", 1, next_version).bump("a", next_version);
        assert_eq!(s.checkpoint.channel_values.get("a"), Some(&Value::from(1)));
        assert_eq!(s.checkpoint.channel_versions["a"].counter(), Some(2));
        assert_eq!(s.new_versions["a"], s.checkpoint.channel_versions["a"]);
    }

    #[test]
    fn bump_of_an_inherited_value_consumes_it_and_leaves_the_parent_alone() {
        let mut first = StepCheckpoint::first(-1);
        first.write("__start__", "in", next_version);
        let mut next = first.checkpoint.successor(0);
        next.bump("__start__", next_version).write("out", "x", next_version);
        assert!(!next.checkpoint.channel_values.contains_key("__start__"));
        assert!(first.checkpoint.channel_values.contains_key("__start__"));
        // Python's rows: a consumed trigger is bumped but not listed as updated
        assert_eq!(
            next.checkpoint.updated_channels.as_deref(),
            Some(&["out".to_owned()][..])
        );
        assert!(next.checkpoint.channel_versions["__start__"] > first.checkpoint.channel_versions["__start__"]);
    }

    #[test]
    fn mark_seen_records_current_versions() {
        let mut s = StepCheckpoint::first(0);
        s.write("a", 1, next_version).mark_seen("node", &["a", "missing"]);
        let seen = &s.checkpoint.versions_seen["node"];
        assert_eq!(seen.len(), 1);
        assert_eq!(seen["a"], s.checkpoint.channel_versions["a"]);
    }
}
