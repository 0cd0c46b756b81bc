//! A persistent (copy-on-write) ordered map: a B+tree whose nodes are shared
//! through `Arc`, so a clone is O(1) and an insert into a clone copies only
//! the O(log n) nodes on its path (nodes the clone owns alone are changed in
//! place). The pending writes of a checkpoint live in one: a reader keeps
//! the version it was handed while a writer builds the next one outside the
//! store lock, and the store swaps the new root in with O(1) work.
//!
//! Only what the write sets need: insert-or-replace, lookup, in-order
//! iteration. Removal is done by the caller with tombstone values.

use std::sync::Arc;

/// Entries per node before it splits.
const CAP: usize = 32;

#[derive(Debug, Clone)]
enum Node<K, V> {
    Leaf(Vec<(K, V)>),
    /// Children with the least key each may hold (the first one's key is a
    /// lower bound only: keys below it go to the first child too).
    Inner(Vec<(K, Arc<Node<K, V>>)>),
}

/// The persistent map.
#[derive(Debug, Clone)]
pub(super) struct PTree<K, V> {
    root: Option<Arc<Node<K, V>>>,
}

impl<K, V> Default for PTree<K, V> {
    fn default() -> Self {
        PTree { root: None }
    }
}

/// The child of an inner node that covers `key`.
fn child_index<K: Ord, C>(children: &[(K, C)], key: &K) -> usize {
    children.partition_point(|(k, _)| k <= key).saturating_sub(1)
}

impl<K: Ord + Clone, V: Clone> PTree<K, V> {
    /// The value at `key`.
    pub(super) fn get(&self, key: &K) -> Option<&V> {
        let mut node = self.root.as_deref()?;
        // The height is O(log n): each level is a node of up to CAP children.
        loop {
            match node {
                Node::Leaf(entries) => {
                    return entries
                        .binary_search_by(|(k, _)| k.cmp(key))
                        .ok()
                        .map(|i| &entries[i].1);
                }
                Node::Inner(children) => node = &children[child_index(children, key)].1,
            }
        }
    }

    /// Inserts or replaces; returns the replaced value.
    pub(super) fn insert(&mut self, key: K, value: V) -> Option<V> {
        let Some(root) = self.root.as_mut() else {
            self.root = Some(Arc::new(Node::Leaf(vec![(key, value)])));
            return None;
        };
        let (old, split) = insert_into(root, key, value);
        if let Some((sep, right)) = split {
            let left = self.root.take().unwrap_or_else(|| unreachable!());
            let first = first_key(&left).clone();
            self.root = Some(Arc::new(Node::Inner(vec![(first, left), (sep, right)])));
        }
        old
    }

    /// Entries in key order.
    pub(super) fn iter(&self) -> Iter<'_, K, V> {
        let mut it = Iter { stack: Vec::new() };
        if let Some(root) = self.root.as_deref() {
            it.descend(root);
        }
        it
    }
}

fn first_key<K, V>(node: &Node<K, V>) -> &K {
    match node {
        Node::Leaf(entries) => &entries[0].0,
        Node::Inner(children) => &children[0].0,
    }
}

type Split<K, V> = Option<(K, Arc<Node<K, V>>)>;

/// Inserts below `node` (copying it first if it is shared); a node that grows
/// past `CAP` splits and hands its right half back. The recursion follows the
/// tree's height, O(log n), never the data.
fn insert_into<K: Ord + Clone, V: Clone>(node: &mut Arc<Node<K, V>>, key: K, value: V) -> (Option<V>, Split<K, V>) {
    let node = Arc::make_mut(node);
    match node {
        Node::Leaf(entries) => match entries.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => (Some(std::mem::replace(&mut entries[i].1, value)), None),
            Err(i) => {
                entries.insert(i, (key, value));
                if entries.len() <= CAP {
                    return (None, None);
                }
                let right = entries.split_off(entries.len() / 2);
                let sep = right[0].0.clone();
                (None, Some((sep, Arc::new(Node::Leaf(right)))))
            }
        },
        Node::Inner(children) => {
            let i = child_index(children, &key);
            let (old, split) = insert_into(&mut children[i].1, key, value);
            let Some((sep, right)) = split else {
                return (old, None);
            };
            children.insert(i + 1, (sep, right));
            if children.len() <= CAP {
                return (old, None);
            }
            let right = children.split_off(children.len() / 2);
            let sep = right[0].0.clone();
            (old, Some((sep, Arc::new(Node::Inner(right)))))
        }
    }
}

/// In-order iterator: a stack of (inner node, next child) down to a leaf.
pub(super) struct Iter<'a, K, V> {
    stack: Vec<Frame<'a, K, V>>,
}

enum Frame<'a, K, V> {
    Leaf(std::slice::Iter<'a, (K, V)>),
    Inner(std::slice::Iter<'a, (K, Arc<Node<K, V>>)>),
}

impl<'a, K, V> Iter<'a, K, V> {
    fn descend(&mut self, node: &'a Node<K, V>) {
        match node {
            Node::Leaf(entries) => self.stack.push(Frame::Leaf(entries.iter())),
            Node::Inner(children) => self.stack.push(Frame::Inner(children.iter())),
        }
    }
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.stack.last_mut()? {
                Frame::Leaf(it) => match it.next() {
                    Some((k, v)) => return Some((k, v)),
                    None => {
                        self.stack.pop();
                    }
                },
                Frame::Inner(it) => match it.next() {
                    Some((_, child)) => {
                        let child: &'a Node<K, V> = child;
                        self.descend(child);
                    }
                    None => {
                        self.stack.pop();
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn matches_btreemap_and_clones_are_independent() {
        let mut t: PTree<u32, u32> = PTree::default();
        let mut m = BTreeMap::new();
        let mut x: u32 = 12345;
        let mut snapshots = Vec::new();
        for i in 0..5000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let k = (x >> 8) % 3000;
            assert_eq!(t.insert(k, i), m.insert(k, i));
            if i % 1000 == 0 {
                snapshots.push((t.clone(), m.clone()));
            }
        }
        assert!(t.iter().map(|(k, v)| (*k, *v)).eq(m.iter().map(|(k, v)| (*k, *v))));
        for k in 0..3100 {
            assert_eq!(t.get(&k), m.get(&k));
        }
        for (t, m) in snapshots {
            assert!(t.iter().map(|(k, v)| (*k, *v)).eq(m.iter().map(|(k, v)| (*k, *v))));
        }
        assert_eq!(PTree::<u32, u32>::default().iter().count(), 0);
    }
}
