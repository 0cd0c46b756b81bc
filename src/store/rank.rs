//! Best-first ranking without sorting everything: the entries of a search,
//! yielded in order a chunk at a time. Each chunk is selected from the
//! rest with `select_nth_unstable_by` (linear) and only the chunk is
//! sorted, so a search that needs the first `k` of `n` entries costs
//! O(n + k log k); chunks double when a page needs more (entries skipped
//! by a filter, an expiry or a second vector of one item).

use std::cmp::Ordering;

/// Entries in the order of `cmp` (`Less` first), selected lazily.
pub(crate) struct Ranked<T, F> {
    rest: Vec<T>,
    chunk: std::vec::IntoIter<T>,
    size: usize,
    cmp: F,
}

impl<T, F: FnMut(&T, &T) -> Ordering> Ranked<T, F> {
    /// `entries` ranked by `cmp`, which must be a total order (the order of
    /// equal entries is otherwise unspecified); the first chunk holds
    /// `first` entries (at least 16).
    pub(crate) fn new(entries: Vec<T>, first: usize, cmp: F) -> Self {
        Ranked {
            rest: entries,
            chunk: Vec::new().into_iter(),
            size: first.max(16),
            cmp,
        }
    }
}

impl<T, F: FnMut(&T, &T) -> Ordering> Iterator for Ranked<T, F> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if let Some(next) = self.chunk.next() {
            return Some(next);
        }
        if self.rest.is_empty() {
            return None;
        }
        let mut chunk = if self.rest.len() > self.size {
            self.rest.select_nth_unstable_by(self.size - 1, &mut self.cmp);
            let tail = self.rest.split_off(self.size);
            std::mem::replace(&mut self.rest, tail)
        } else {
            std::mem::take(&mut self.rest)
        };
        chunk.sort_unstable_by(&mut self.cmp);
        self.size = self.size.saturating_mul(2);
        self.chunk = chunk.into_iter();
        self.chunk.next()
    }
}

/// Scores best first: higher first, `None` (no score: a zero vector, as
/// SQL's NULL) after every score.
pub(crate) fn score_order(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yields_everything_in_order_across_chunks() {
        // a pseudo-random permutation with repeated scores
        let entries: Vec<(u32, usize)> = (0..1000usize).map(|i| (((i * 7919) % 97) as u32, i)).collect();
        let mut expected = entries.clone();
        expected.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let ranked: Vec<_> = Ranked::new(entries, 3, |a: &(u32, usize), b: &(u32, usize)| {
            b.0.cmp(&a.0).then(a.1.cmp(&b.1))
        })
        .collect();
        assert_eq!(ranked, expected);
        let none: Vec<(u32, usize)> = Ranked::new(Vec::new(), 10, |a: &(u32, usize), b| a.cmp(b)).collect();
        assert!(none.is_empty());
    }

    #[test]
    fn scores_rank_high_first_and_none_last() {
        let mut v = vec![None, Some(0.5), Some(-1.0), None, Some(0.9)];
        v.sort_by(|a, b| score_order(*a, *b));
        assert_eq!(v, [Some(0.9), Some(0.5), Some(-1.0), None, None]);
    }
}
