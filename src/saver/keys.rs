//! What a thread stores, by key: [`ThreadKeys`].

/// The keys of everything one thread stores, read without decoding a value:
/// what [`CheckpointSaver::thread_keys`](super::CheckpointSaver::thread_keys)
/// returns. Tools use it to see a thread's namespaces, to name a checkpoint
/// whose bytes cannot be decoded, and to find writes saved against a
/// checkpoint that is not stored.
///
/// ```
/// use checkpointer::saver::{CheckpointKey, ThreadKeys};
///
/// let key = |ns: &str, id: &str| CheckpointKey {
///     checkpoint_ns: ns.into(),
///     checkpoint_id: id.into(),
///     parent_checkpoint_id: None,
/// };
/// let keys = ThreadKeys {
///     checkpoints: vec![key("", "1"), key("", "2"), key("child:1", "3")],
///     writes: vec![],
/// };
/// assert_eq!(keys.namespaces(), vec![("", 2), ("child:1", 1)]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadKeys {
    /// Every stored checkpoint, sorted by (namespace, id), by code point.
    pub checkpoints: Vec<CheckpointKey>,
    /// Every stored write, sorted by (namespace, checkpoint id, task path,
    /// task id, idx), writes of checkpoints that are not stored included.
    pub writes: Vec<WriteKey>,
}

impl ThreadKeys {
    /// The thread's namespaces, in order, each with its number of
    /// checkpoints.
    pub fn namespaces(&self) -> Vec<(&str, usize)> {
        let mut out: Vec<(&str, usize)> = Vec::new();
        for c in &self.checkpoints {
            match out.last_mut() {
                Some((ns, n)) if *ns == c.checkpoint_ns => *n += 1,
                _ => out.push((&c.checkpoint_ns, 1)),
            }
        }
        out
    }

    /// The writes saved against a checkpoint that is not stored, in order:
    /// what `get_tuple` and `list` cannot show. One pass over both sorted
    /// lists.
    ///
    /// ```
    /// use checkpointer::saver::{CheckpointKey, ThreadKeys, WriteKey};
    ///
    /// let write = |id: &str| WriteKey {
    ///     checkpoint_ns: String::new(),
    ///     checkpoint_id: id.into(),
    ///     task_id: "task".into(),
    ///     task_path: String::new(),
    ///     idx: 0,
    ///     channel: "a".into(),
    /// };
    /// let keys = ThreadKeys {
    ///     checkpoints: vec![CheckpointKey {
    ///         checkpoint_ns: String::new(),
    ///         checkpoint_id: "2".into(),
    ///         parent_checkpoint_id: None,
    ///     }],
    ///     writes: vec![write("1"), write("2"), write("3")],
    /// };
    /// let orphans: Vec<&str> = keys.orphan_writes().map(|w| w.checkpoint_id.as_str()).collect();
    /// assert_eq!(orphans, ["1", "3"]);
    /// ```
    pub fn orphan_writes(&self) -> impl Iterator<Item = &WriteKey> + '_ {
        let mut stored = self.checkpoints.iter().peekable();
        self.writes.iter().filter(move |w| {
            let key = (w.checkpoint_ns.as_str(), w.checkpoint_id.as_str());
            while stored
                .next_if(|c| (c.checkpoint_ns.as_str(), c.checkpoint_id.as_str()) < key)
                .is_some()
            {}
            stored
                .peek()
                .is_none_or(|c| (c.checkpoint_ns.as_str(), c.checkpoint_id.as_str()) != key)
        })
    }

    /// Puts both lists in their documented order (by code point, whatever
    /// a database's collation).
    pub(crate) fn sort(&mut self) {
        self.checkpoints
            .sort_by(|a, b| (&a.checkpoint_ns, &a.checkpoint_id).cmp(&(&b.checkpoint_ns, &b.checkpoint_id)));
        self.writes.sort_by(|a, b| a.order().cmp(&b.order()));
    }
}

/// One stored checkpoint's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CheckpointKey {
    /// Its namespace (`""`: the root graph).
    pub checkpoint_ns: String,
    /// Its id.
    pub checkpoint_id: String,
    /// Its parent's id, as stored.
    pub parent_checkpoint_id: Option<String>,
}

/// One stored write's key: where it is saved and what identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WriteKey {
    /// The namespace of its checkpoint.
    pub checkpoint_ns: String,
    /// The checkpoint it is saved against (which may not be stored).
    pub checkpoint_id: String,
    /// The task that made it.
    pub task_id: String,
    /// The task path given to `put_writes`.
    pub task_path: String,
    /// Its index (see [`PendingWrite::idx`](crate::PendingWrite::idx)).
    pub idx: i64,
    /// The channel written.
    pub channel: String,
}

impl WriteKey {
    fn order(&self) -> (&str, &str, &str, &str, i64) {
        (
            &self.checkpoint_ns,
            &self.checkpoint_id,
            &self.task_path,
            &self.task_id,
            self.idx,
        )
    }
}
