//! The shape of checkpoints this saver stored recently: for each channel its
//! version and whether a value was stored. `put` uses it to skip reading a
//! parent that cannot fill any of the channels the new checkpoint leaves
//! without a value (a consumed trigger such as `__start__` has a version and
//! no value in every later checkpoint of a LangGraph run).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::checkpoint::Checkpoint;
use crate::version::ChannelVersion;

/// Channel → (version, whether a value is stored).
pub(crate) type Shape = HashMap<String, (ChannelVersion, bool)>;

type Key = (String, String, String);

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<Key, Arc<Shape>>,
    order: VecDeque<Key>,
}

/// A bounded map from (thread, namespace, checkpoint id) to [`Shape`],
/// forgetting the oldest entries first.
#[derive(Debug)]
pub(crate) struct Recent {
    capacity: usize,
    entries: parking_lot::Mutex<Entries>,
}

impl Recent {
    pub(crate) fn new(capacity: usize) -> Self {
        Recent {
            capacity,
            entries: parking_lot::Mutex::new(Entries::default()),
        }
    }

    pub(crate) fn remember(&self, thread: &str, ns: &str, checkpoint: &Checkpoint) {
        let shape: Shape = checkpoint
            .channel_versions
            .iter()
            .map(|(ch, v)| (ch.clone(), (v.clone(), checkpoint.channel_values.contains_key(ch))))
            .collect();
        let key = (thread.to_owned(), ns.to_owned(), checkpoint.id.clone());
        let mut entries = self.entries.lock();
        if entries.map.insert(key.clone(), Arc::new(shape)).is_none() {
            entries.order.push_back(key);
            while entries.order.len() > self.capacity {
                if let Some(old) = entries.order.pop_front() {
                    entries.map.remove(&old);
                }
            }
        }
    }

    pub(crate) fn get(&self, thread: &str, ns: &str, id: &str) -> Option<Arc<Shape>> {
        self.entries
            .lock()
            .map
            .get(&(thread.to_owned(), ns.to_owned(), id.to_owned()))
            .cloned()
    }
}
