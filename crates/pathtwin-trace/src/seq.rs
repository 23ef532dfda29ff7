//! TCP sequence space: unwrapping 32-bit sequence numbers and remembering which bytes were
//! already sent.
//!
//! Owns the two questions every later analysis asks of a sequence number: "where is it in
//! the 64-bit stream" ([`Unwrapper`], nearest-to-reference unwrapping as in RFC 9293's
//! modular comparisons, so wrap-around at 2^32 is transparent) and "how much of this segment
//! was seen before" ([`SeenRanges`], the retransmission definition of tcptrace's
//! `rexmit.c`: a segment is a retransmission if any of its bytes were seen before, and the
//! overlap is its retransmitted byte count). Memory is bounded by the number of holes, not by
//! the stream length: everything below the first hole collapses into one number.

/// Maps 32-bit sequence numbers of one direction to positions in a 64-bit stream.
#[derive(Debug, Clone, Copy)]
pub struct Unwrapper {
    base: u32,
    /// The last unwrapped value; new values are placed within ±2^31 of it.
    reference: u64,
}

/// Unwrapped positions start here so that a sequence number slightly before the first one
/// seen (a retransmitted SYN, a late packet) does not go below zero.
pub const ORIGIN: u64 = 1 << 32;

impl Unwrapper {
    /// Anchors the stream at `base`, which unwraps to [`ORIGIN`].
    pub fn new(base: u32) -> Self {
        Unwrapper { base, reference: ORIGIN }
    }

    /// Unwraps `seq` to the 64-bit position nearest the last one returned.
    pub fn unwrap(&mut self, seq: u32) -> u64 {
        let v = self.peek(seq);
        if v > self.reference {
            self.reference = v;
        }
        v
    }

    /// Unwraps without moving the reference forward.
    pub fn peek(&self, seq: u32) -> u64 {
        let rel = seq.wrapping_sub(self.base) as u64;
        let r = self.reference;
        // Candidates in the 2^32-wide windows around the reference; take the closest.
        let hi = r & !0xffff_ffff;
        let mut best = hi | rel;
        for cand in [best.wrapping_sub(1 << 32), best + (1 << 32)] {
            if cand.abs_diff(r) < best.abs_diff(r) {
                best = cand;
            }
        }
        best.max(1)
    }
}

/// The set of stream bytes already seen in one direction.
#[derive(Debug, Clone, Default)]
pub struct SeenRanges {
    /// Every byte below this was seen (once anything was).
    floor: u64,
    /// Seen ranges above `floor`, sorted, disjoint, not touching `floor` or each other.
    ranges: Vec<(u64, u64)>,
    started: bool,
}

impl SeenRanges {
    /// Records `[start, end)` and returns how many of its bytes had been seen before.
    pub fn insert(&mut self, start: u64, end: u64) -> u64 {
        if end <= start {
            return 0;
        }
        if !self.started {
            // Bytes before the first segment were never seen by us: a later segment there is
            // new data that arrived out of order at capture start, not a retransmission.
            self.started = true;
            self.ranges.push((start, end));
            return 0;
        }
        // Fast path, the common case: in-order data extending the highest range.
        if let Some(last) = self.ranges.last_mut() {
            if start == last.1 && start >= self.floor {
                last.1 = end;
                return 0;
            }
        }
        let mut overlap = end.min(self.floor).saturating_sub(start);
        let (mut s, mut e) = (start.max(self.floor), end);
        if s < e {
            // Merge with every range it touches, counting the bytes it shares with them.
            let i = self.ranges.partition_point(|&(_, re)| re < s);
            while i < self.ranges.len() && self.ranges[i].0 <= e {
                let (rs, re) = self.ranges.remove(i);
                overlap += e.min(re).saturating_sub(s.max(rs));
                s = s.min(rs);
                e = e.max(re);
            }
            self.ranges.insert(i, (s, e));
        }
        self.absorb_contiguous();
        overlap
    }

    /// The highest byte position seen plus one.
    pub fn high(&self) -> u64 {
        self.ranges.last().map_or(self.floor, |r| r.1.max(self.floor))
    }

    /// Number of holes (ranges not yet contiguous with the start).
    pub fn holes(&self) -> usize {
        self.ranges.len()
    }

    /// Declares everything below `pos` seen (the receiver acknowledged it).
    pub fn acknowledge(&mut self, pos: u64) {
        if self.started && pos > self.floor {
            self.floor = pos;
            self.ranges.retain(|&(_, re)| re > pos);
            if let Some(first) = self.ranges.first_mut() {
                first.0 = first.0.max(pos);
            }
            self.absorb_contiguous();
        }
    }

    /// Moves ranges that now reach the floor into it.
    fn absorb_contiguous(&mut self) {
        while let Some(&(rs, re)) = self.ranges.first() {
            if rs > self.floor {
                break;
            }
            self.floor = self.floor.max(re);
            self.ranges.remove(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap_crosses_2_pow_32() {
        let mut u = Unwrapper::new(u32::MAX - 1000);
        let a = u.unwrap(u32::MAX - 1000);
        let b = u.unwrap(u32::MAX);
        let c = u.unwrap(500);
        assert_eq!(a, ORIGIN);
        assert_eq!(b - a, 1000);
        assert_eq!(c - a, 1000 + 1 + 500);
        // A retransmission from before the wrap still lands before it.
        assert_eq!(u.unwrap(u32::MAX - 10), a + 990);
    }

    /// Brute force: a byte-level set gives the expected overlap of random segments.
    #[test]
    fn overlap_matches_byte_set() {
        let mut state = 0x1234_5678_u64;
        let mut rnd = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..200 {
            let mut seen = SeenRanges::default();
            let mut bytes = vec![false; 400];
            for _ in 0..30 {
                let s = rnd(380);
                let e = s + 1 + rnd(20);
                let expected = (s..e).filter(|&i| bytes[i as usize]).count() as u64;
                for i in s..e {
                    bytes[i as usize] = true;
                }
                let first = !seen.started;
                let got = seen.insert(s, e);
                if !first {
                    assert_eq!(got, expected, "segment {s}..{e}");
                }
            }
        }
    }
}
