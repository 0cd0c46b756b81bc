//! [`StepCheckpoint`]: the checkpoint a super-step makes from its parent.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, OnceLock};

use super::{ChannelVersions, Checkpoint, CHECKPOINT_VERSION};
use crate::error::Result;
use crate::serde::Value;
use crate::version::ChannelVersion;

/// The checkpoint a super-step is building, and the channel versions it has
/// bumped so far: what [`CheckpointSaver::put`](crate::CheckpointSaver::put)
/// takes as `checkpoint` ([`StepCheckpoint::checkpoint`]) and `new_versions`.
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
/// # Cost
///
/// A write, bump or [`mark_seen`](StepCheckpoint::mark_seen) costs a map
/// insertion, whatever the step already holds: the sorted
/// `updated_channels` and the removal of consumed values are made once,
/// when [`checkpoint`](StepCheckpoint::checkpoint) is first read after a
/// change (O(n log n) in the channels the step wrote, plus one pass over
/// the values when it consumed any), and kept until the next change. A step
/// of n writes therefore costs O(n log n); reading the checkpoint between
/// every two writes costs O(channels) each time.
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
/// input.write("__start__", "hello", next)?;
/// let config = CheckpointConfig::new("thread-1");
/// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
/// let config = saver.put(&config, input.checkpoint(), &meta, &input.new_versions).await?;
///
/// // The next step: the input channel is consumed (bumped, no value) and
/// // the node's output written.
/// let mut step = input.checkpoint().successor(0);
/// step.bump("__start__", next)?.write("greeting", "hello, world", next)?;
/// step.mark_seen("greeter", &["__start__"]);
/// assert_eq!(step.new_versions.len(), 2);
/// // the consumed input is bumped, not listed as updated
/// assert_eq!(step.checkpoint().updated_channels.as_deref(), Some(&["greeting".to_owned()][..]));
/// assert!(step.checkpoint().channel_versions["__start__"] > input.checkpoint().channel_versions["__start__"]);
/// assert!(!step.checkpoint().channel_values.contains_key("__start__"));
/// let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
/// saver.put(&config, step.checkpoint(), &meta, &step.new_versions).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct StepCheckpoint {
    /// The checkpoint as built so far, without the pending changes below.
    draft: Checkpoint,
    /// The versions this step gave its channels: `put`'s `new_versions`.
    pub new_versions: ChannelVersions,
    /// Channels written since the draft was last brought up to date, in
    /// write order, repeats included: merged into `updated_channels` once.
    written: Vec<String>,
    /// Values consumed since then, still in the draft's `channel_values`.
    consumed: HashSet<String>,
    /// The draft with the pending changes applied, made on first read.
    sealed: OnceLock<Checkpoint>,
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
    /// assert!(next.checkpoint().id > parent.id);
    /// assert!(next.checkpoint().channel_values.ptr_eq(&parent.channel_values));
    /// assert!(next.new_versions.is_empty());
    /// ```
    pub fn successor(&self, step: i64) -> StepCheckpoint {
        StepCheckpoint::from_draft(Checkpoint {
            v: CHECKPOINT_VERSION,
            id: crate::id::checkpoint_id(step),
            ts: crate::id::now_iso(),
            updated_channels: None,
            pending_sends: None,
            ..self.clone()
        })
    }
}

impl StepCheckpoint {
    /// The first checkpoint of a thread (LangGraph's input checkpoint is at
    /// step −1): empty, with a fresh id and the current time.
    pub fn first(step: i64) -> Self {
        StepCheckpoint::from_draft(Checkpoint::new(step))
    }

    fn from_draft(draft: Checkpoint) -> Self {
        StepCheckpoint {
            draft,
            new_versions: ChannelVersions::new(),
            written: Vec::new(),
            consumed: HashSet::new(),
            sealed: OnceLock::new(),
        }
    }

    /// The checkpoint built so far: what `put` stores.
    pub fn checkpoint(&self) -> &Checkpoint {
        if self.written.is_empty() && self.consumed.is_empty() {
            return &self.draft;
        }
        self.sealed.get_or_init(|| {
            let mut cp = self.draft.clone();
            self.apply_pending(&mut cp);
            cp
        })
    }

    /// The checkpoint built so far, to change directly (to add an entry to
    /// `versions_seen`, say). Changes made here are not versions: give a
    /// changed channel its version with [`write`](StepCheckpoint::write) or
    /// [`bump`](StepCheckpoint::bump).
    pub fn checkpoint_mut(&mut self) -> &mut Checkpoint {
        self.flush();
        &mut self.draft
    }

    /// The checkpoint built so far, taken out.
    pub fn into_checkpoint(mut self) -> Checkpoint {
        self.flush();
        self.draft
    }

    /// The value `channel` holds in the checkpoint built so far (`None`
    /// once consumed by a [`bump`](StepCheckpoint::bump)).
    pub fn value(&self, channel: &str) -> Option<&Value> {
        if self.consumed.contains(channel) {
            return None;
        }
        self.draft.channel_values.get(channel)
    }

    /// The channels holding a value in the checkpoint built so far, in
    /// the order of `channel_values`.
    pub fn channels_with_values(&self) -> impl Iterator<Item = &String> {
        self.draft
            .channel_values
            .keys()
            .filter(|c| !self.consumed.contains(c.as_str()))
    }

    /// Sets `channel`'s value and gives it its next version (a channel
    /// written again keeps its place in `channel_values`).
    ///
    /// # Errors
    /// `next_version`'s; the step is unchanged then.
    pub fn write(
        &mut self,
        channel: &str,
        value: impl Into<Value>,
        next_version: impl Fn(Option<&ChannelVersion>) -> Result<ChannelVersion>,
    ) -> Result<&mut Self> {
        let version = next_version(self.draft.channel_versions.get(channel))?;
        self.changed();
        self.consumed.remove(channel);
        self.draft.channel_values.insert(channel.to_owned(), value.into());
        self.record(channel, version);
        self.written.push(channel.to_owned());
        Ok(self)
    }

    /// Sets `channel`'s value and gives it its next version without naming
    /// it in `updated_channels`: LangGraph lists only the channels a step
    /// updated and left readable, not a join barrier still waiting or
    /// emptied, nor the emptied list of `Send`s.
    pub(crate) fn write_unlisted(
        &mut self,
        channel: &str,
        value: Value,
        next_version: impl Fn(Option<&ChannelVersion>) -> Result<ChannelVersion>,
    ) -> Result<&mut Self> {
        let version = next_version(self.draft.channel_versions.get(channel))?;
        self.changed();
        self.consumed.remove(channel);
        self.draft.channel_values.insert(channel.to_owned(), value);
        self.record(channel, version);
        Ok(self)
    }

    /// Gives `channel` its next version without a value, and removes the
    /// value it had: what a consumed trigger (`__start__`, `branch:to:…`)
    /// looks like after the step that read it. A bump is not a write: the
    /// channel is not added to `updated_channels` (Python lists only the
    /// channels a step's writes updated there). The bump is a new version,
    /// so code comparing versions to decide what runs must compare against
    /// `versions_seen` (see [`StepCheckpoint::mark_seen`]), not look for a
    /// value.
    ///
    /// # Errors
    /// `next_version`'s; the step is unchanged then.
    pub fn bump(
        &mut self,
        channel: &str,
        next_version: impl Fn(Option<&ChannelVersion>) -> Result<ChannelVersion>,
    ) -> Result<&mut Self> {
        let version = next_version(self.draft.channel_versions.get(channel))?;
        self.changed();
        if !self.new_versions.contains_key(channel) && self.draft.channel_values.contains_key(channel) {
            // consumed: a bump without a write in this step drops the old value
            self.consumed.insert(channel.to_owned());
        }
        self.record(channel, version);
        Ok(self)
    }

    /// Records `channel`'s new version in `channel_versions` and
    /// `new_versions`.
    fn record(&mut self, channel: &str, version: ChannelVersion) {
        self.draft.channel_versions.insert(channel.to_owned(), version.clone());
        self.new_versions.insert(channel.to_owned(), version);
    }

    /// Records that `node` ran having seen the current versions of
    /// `channels` (`versions_seen[node]`), so a later step knows which of
    /// its triggers are new.
    pub fn mark_seen(&mut self, node: &str, channels: &[&str]) -> &mut Self {
        self.changed();
        let draft = &mut self.draft;
        // after its first change the node's map is this step's own: later
        // calls insert into it without copying it again
        let seen = draft.versions_seen.entry(node.to_owned()).or_default();
        for ch in channels {
            if let Some(v) = draft.channel_versions.get(*ch) {
                seen.insert((*ch).to_owned(), v.clone());
            }
        }
        self
    }

    /// Forgets the checkpoint made for readers: the step changes.
    fn changed(&mut self) {
        self.sealed.take();
    }

    /// Applies the pending changes to the draft itself.
    fn flush(&mut self) {
        self.changed();
        let mut draft = std::mem::replace(
            &mut self.draft,
            Checkpoint::with_identity(0, String::new(), String::new()),
        );
        self.apply_pending(&mut draft);
        self.draft = draft;
        self.written.clear();
        self.consumed.clear();
    }

    /// The pending removals and `updated_channels` entries, applied to `cp`.
    fn apply_pending(&self, cp: &mut Checkpoint) {
        if !self.consumed.is_empty() {
            // one pass that copies only what stays (a retain would copy the
            // whole shared map first)
            cp.channel_values = cp
                .channel_values
                .iter()
                .filter(|(c, _)| !self.consumed.contains(c.as_str()))
                .map(|(c, v)| (c.clone(), v.clone()))
                .collect();
        }
        if !self.written.is_empty() {
            let before = cp.updated_channels.as_deref().unwrap_or_default();
            let mut updated: Vec<String> = Vec::with_capacity(before.len() + self.written.len());
            updated.extend(before.iter().cloned());
            updated.extend(self.written.iter().cloned());
            updated.sort_unstable();
            updated.dedup();
            cp.updated_channels = Some(Arc::from(updated));
        }
    }
}

impl PartialEq for StepCheckpoint {
    fn eq(&self, other: &Self) -> bool {
        self.checkpoint() == other.checkpoint() && self.new_versions == other.new_versions
    }
}

impl fmt::Debug for StepCheckpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepCheckpoint")
            .field("checkpoint", self.checkpoint())
            .field("new_versions", &self.new_versions)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::next_version;

    #[test]
    fn write_then_bump_keeps_the_written_value() {
        let mut s = StepCheckpoint::first(0);
        s.write("a", 1, next_version).unwrap().bump("a", next_version).unwrap();
        assert_eq!(s.checkpoint().channel_values.get("a"), Some(&Value::from(1)));
        assert_eq!(s.checkpoint().channel_versions["a"].counter(), Some(2));
        assert_eq!(s.new_versions["a"], s.checkpoint().channel_versions["a"]);
    }

    #[test]
    fn bump_of_an_inherited_value_consumes_it_and_leaves_the_parent_alone() {
        let mut first = StepCheckpoint::first(-1);
        first.write("__start__", "in", next_version).unwrap();
        let mut next = first.checkpoint().successor(0);
        next.bump("__start__", next_version)
            .unwrap()
            .write("out", "x", next_version)
            .unwrap();
        assert!(!next.checkpoint().channel_values.contains_key("__start__"));
        assert!(first.checkpoint().channel_values.contains_key("__start__"));
        // Python's rows: a consumed trigger is bumped but not listed as updated
        assert_eq!(
            next.checkpoint().updated_channels.as_deref(),
            Some(&["out".to_owned()][..])
        );
        assert!(next.checkpoint().channel_versions["__start__"] > first.checkpoint().channel_versions["__start__"]);
    }

    #[test]
    fn mark_seen_records_current_versions() {
        let mut s = StepCheckpoint::first(0);
        s.write("a", 1, next_version)
            .unwrap()
            .mark_seen("node", &["a", "missing"]);
        let seen = &s.checkpoint().versions_seen["node"];
        assert_eq!(seen.len(), 1);
        assert_eq!(seen["a"], s.checkpoint().channel_versions["a"]);
    }

    /// Writes, bumps and `mark_seen` cost a map insertion each: a step of
    /// 100 000 channels written in reverse order, with as many inherited
    /// values consumed and one node marking each, finishes with every
    /// channel listed once, sorted, and the consumed values gone.
    #[test]
    fn a_wide_step_is_built_in_n_log_n() {
        const N: usize = 100_000;
        let mut parent = StepCheckpoint::first(0);
        for i in 0..N {
            parent.write(&format!("in{i:06}"), 1, next_version).unwrap();
        }
        let parent = parent.into_checkpoint();
        let mut s = parent.successor(1);
        for i in (0..N).rev() {
            s.bump(&format!("in{i:06}"), next_version)
                .unwrap()
                .write(&format!("out{i:06}"), i as i64, next_version)
                .unwrap()
                .write(&format!("out{i:06}"), i as i64 + 1, next_version)
                .unwrap()
                .mark_seen("node", &[&format!("in{i:06}")]);
        }
        let cp = s.checkpoint();
        let updated = cp.updated_channels.as_deref().unwrap();
        assert_eq!(updated.len(), N);
        assert!(updated.iter().enumerate().all(|(i, c)| *c == format!("out{i:06}")));
        assert_eq!(cp.channel_values.len(), N);
        assert_eq!(s.value("out000007"), Some(&Value::from(8)));
        assert_eq!(s.value("in000007"), None);
        assert_eq!(cp.versions_seen["node"].len(), N);
        assert_eq!(cp.channel_versions["out000007"].counter(), Some(2));
        assert_eq!(parent.channel_values.len(), N, "the parent is untouched");
    }

    /// Reading between changes, changing the checkpoint directly, writing a
    /// consumed channel again and cloning see one consistent step.
    #[test]
    fn reads_between_changes_see_every_change() {
        let mut first = StepCheckpoint::first(-1);
        first
            .write("a", 1, next_version)
            .unwrap()
            .write("t", 0, next_version)
            .unwrap();
        let mut s = first.checkpoint().successor(0);
        s.bump("t", next_version).unwrap();
        assert!(!s.checkpoint().channel_values.contains_key("t"));
        assert_eq!(s.checkpoint().updated_channels, None);
        s.write("b", 2, next_version).unwrap();
        assert_eq!(s.checkpoint().updated_channels.as_deref(), Some(&["b".to_owned()][..]));
        s.checkpoint_mut()
            .versions_seen
            .insert("x".to_owned(), Default::default());
        s.write("t", 3, next_version)
            .unwrap()
            .write("a", 4, next_version)
            .unwrap();
        let copy = s.clone();
        assert_eq!(copy, s);
        let cp = s.into_checkpoint();
        assert_eq!(cp.updated_channels.as_deref().unwrap(), ["a", "b", "t"]);
        assert_eq!(cp.channel_values["t"], Value::from(3));
        assert!(cp.versions_seen.contains_key("x"));
        assert_eq!(copy.checkpoint(), &cp);
        // a refused version changes nothing
        let mut s = cp.successor(1);
        let before = s.clone();
        assert!(s.write("a", 5, |_| Err(crate::Error::invalid("no"))).is_err());
        assert!(s.bump("a", |_| Err(crate::Error::invalid("no"))).is_err());
        assert_eq!(s, before);
        assert_eq!(s.value("a"), Some(&Value::from(4)));
    }
}
