//! A set of sequence numbers kept as sorted, disjoint, non-adjacent half-open ranges in a
//! `Vec`.
//!
//! Used for the receiver's out-of-order data and the sender's SACKed data. Both hold one
//! range per hole in the sequence space, which is a handful even under heavy loss, so a
//! sorted `Vec` beats a tree and, once it has grown, never allocates again.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RangeSet {
    ranges: Vec<(u64, u64)>,
}

impl RangeSet {
    pub fn new() -> Self {
        RangeSet { ranges: Vec::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn first(&self) -> Option<(u64, u64)> {
        self.ranges.first().copied()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().copied()
    }

    /// Adds `[start, end)`, merging with overlapping or adjacent ranges. Calls `new_part` for
    /// each maximal sub-range that was not in the set before, in increasing order, and
    /// returns how many sequence numbers were added.
    pub fn insert_with(&mut self, start: u64, end: u64, mut new_part: impl FnMut(u64, u64)) -> u64 {
        if start >= end {
            return 0;
        }
        // First range that overlaps or touches [start, end).
        let i = self.ranges.partition_point(|r| r.1 < start);
        let mut cursor = start;
        let mut added = 0;
        let (mut lo, mut hi) = (start, end);
        let mut j = i;
        while j < self.ranges.len() && self.ranges[j].0 <= end {
            let (rs, re) = self.ranges[j];
            if rs > cursor {
                new_part(cursor, rs);
                added += rs - cursor;
            }
            cursor = cursor.max(re);
            lo = lo.min(rs);
            hi = hi.max(re);
            j += 1;
        }
        if cursor < end {
            new_part(cursor, end);
            added += end - cursor;
        }
        if j == i {
            self.ranges.insert(i, (start, end));
        } else {
            self.ranges[i] = (lo, hi);
            self.ranges.drain(i + 1..j);
        }
        added
    }

    pub fn insert(&mut self, start: u64, end: u64) -> u64 {
        self.insert_with(start, end, |_, _| {})
    }

    /// Forgets every sequence number below `seq`.
    pub fn remove_below(&mut self, seq: u64) {
        let n = self.ranges.partition_point(|r| r.1 <= seq);
        self.ranges.drain(..n);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(seq);
        }
    }

    /// The range containing `seq`, if any.
    pub fn containing(&self, seq: u64) -> Option<(u64, u64)> {
        let i = self.ranges.partition_point(|r| r.1 <= seq);
        self.ranges.get(i).copied().filter(|r| r.0 <= seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(set: &mut RangeSet, s: u64, e: u64) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        set.insert_with(s, e, |a, b| v.push((a, b)));
        v
    }

    #[test]
    fn insert_merges_and_reports_only_new_parts() {
        let mut s = RangeSet::new();
        assert_eq!(parts(&mut s, 10, 20), [(10, 20)]);
        assert_eq!(parts(&mut s, 30, 40), [(30, 40)]);
        assert_eq!(parts(&mut s, 15, 35), [(20, 30)]);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(10, 40)]);
        assert_eq!(parts(&mut s, 40, 50), [(40, 50)]); // adjacent merges
        assert_eq!(s.iter().collect::<Vec<_>>(), [(10, 50)]);
        assert_eq!(parts(&mut s, 12, 18), []);
        assert_eq!(parts(&mut s, 0, 5), [(0, 5)]);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(0, 5), (10, 50)]);
        assert_eq!(parts(&mut s, 0, 60), [(5, 10), (50, 60)]);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(0, 60)]);
    }

    #[test]
    fn insert_between_keeps_order() {
        let mut s = RangeSet::new();
        s.insert(50, 60);
        s.insert(10, 20);
        s.insert(30, 40);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(10, 20), (30, 40), (50, 60)]);
        assert_eq!(s.insert(5, 70), 35);
    }

    #[test]
    fn remove_below_trims_and_containing_finds() {
        let mut s = RangeSet::new();
        s.insert(10, 20);
        s.insert(30, 40);
        assert_eq!(s.containing(35), Some((30, 40)));
        assert_eq!(s.containing(20), None);
        s.remove_below(15);
        assert_eq!(s.first(), Some((15, 20)));
        s.remove_below(20);
        assert_eq!(s.first(), Some((30, 40)));
        s.remove_below(100);
        assert!(s.is_empty());
    }
}
