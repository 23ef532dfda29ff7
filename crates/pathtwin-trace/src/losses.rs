//! Which of the server's transmissions the capture shows lost, by byte offset: what a replay
//! pipe's `drop` re-enacts (`pathtwin_core::element::TraceLoss`), so that a replayed
//! connection loses the data its original lost rather than a random draw at its loss rate.
//!
//! Seen next to the server, a lost segment is one the server sent again: every downstream
//! retransmission (`conn`'s definition, tcptrace's) is a lost transmission of its range,
//! unless it is shown unnecessary, in one of three ways:
//! - the client had already acknowledged the range when it was sent again (cumulatively: the
//!   part below the ACK was received, RFC 793's acknowledgment); only the rest counts;
//! - a D-SACK block reports the range received twice (RFC 2883 §4): the latest
//!   retransmission overlapping the block was spurious;
//! - Monkey's test (Cheng et al., USENIX ATC 2004, §3.2), as `conn` applies it: the ACK
//!   answering the retransmission (matched by its TSval as Eifel does, RFC 3522, or timed
//!   one min RTT after it) is a duplicate, so the data was there already. A tail loss
//!   probe (RFC 8985 §7) that finds its segment delivered is the usual case.
//!
//! D-SACK is exact where the receiver sends it (Linux does by default), and the duplicate-ACK
//! test then only guesses; a receiver that never sends one (the simulator's TCP, an old
//! stack) leaves only the test. So a connection whose capture holds a D-SACK block is judged
//! by D-SACK alone, any other by the test.
//!
//! A range sent k times and lost k times shows k retransmissions before the one that got
//! through, so it is listed k times. A retransmission spanning several of the traced
//! segments lost each: its range is listed at every segment start (one MSS apart), and the
//! replay drops whatever segment of its own covers each. Losses to the bottleneck queue's
//! overflow are listed too: a replay pipe drops the listed transmissions *ahead of* its
//! queue (`pathtwin_core::topology`), so that its queue sees the survivors the traced one
//! let through and overflows no more than it did, and no loss is replayed twice (random
//! loss has to leave them out instead, `random_loss_rate`, because its draws fall anywhere).
//! Handshake and FIN retransmissions are not data and are not listed.
//!
//! Memory is bounded: the first [`LOSS_LOG`] retransmissions of a connection are kept.

/// Retransmissions of one connection kept for [`LossLog::offsets`].
pub const LOSS_LOG: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Retransmission {
    /// Stream range of the data sent again (absolute, `seq`'s unwrapped positions).
    start: u64,
    end: u64,
    /// A D-SACK block named it.
    dsacked: bool,
    /// Monkey's duplicate-ACK test found it unnecessary.
    dupacked: bool,
}

/// The server's data retransmissions, each with whether it was shown unnecessary.
#[derive(Debug, Clone, Default)]
pub struct LossLog {
    entries: Vec<Retransmission>,
    /// Whether any D-SACK block was seen: the receiver sends them.
    dsack_seen: bool,
}

impl LossLog {
    /// A retransmission of data `[start, end)` sent while the client's cumulative ACK stood
    /// at `acked`; returns its index for [`LossLog::spurious`], or `None` when the ACK
    /// already covered it all (nothing of it was lost) or the log is full.
    pub fn retransmitted(&mut self, start: u64, end: u64, acked: u64) -> Option<usize> {
        let start = start.max(acked);
        if end <= start || self.entries.len() >= LOSS_LOG {
            return None;
        }
        self.entries.push(Retransmission { start, end, dsacked: false, dupacked: false });
        Some(self.entries.len() - 1)
    }

    /// Monkey's duplicate-ACK test found retransmission `index` unnecessary.
    pub fn dupack(&mut self, index: usize) {
        if let Some(r) = self.entries.get_mut(index) {
            r.dupacked = true;
        }
    }

    /// A D-SACK block `[left, right)`: the latest retransmission overlapping it not yet
    /// named by one was unnecessary (the block reports the second copy of data received).
    pub fn dsack(&mut self, left: u64, right: u64) {
        self.dsack_seen = true;
        if let Some(r) = self.entries.iter_mut().rev().find(|r| !r.dsacked && r.start < right && left < r.end) {
            r.dsacked = true;
        }
    }

    /// Offsets of the lost transmissions from the first payload byte at `first_byte`, in
    /// ascending order with repeats: every retransmission not shown spurious (by D-SACK if
    /// the receiver sent any, else by the duplicate-ACK test), at each `mss` step of its
    /// range.
    pub fn offsets(&self, first_byte: u64, mss: u64) -> Vec<u64> {
        let mss = mss.max(1);
        let spurious = |r: &Retransmission| if self.dsack_seen { r.dsacked } else { r.dupacked };
        let mut out: Vec<u64> = Vec::new();
        for r in self.entries.iter().filter(|r| !spurious(r) && r.start >= first_byte) {
            let mut at = r.start;
            while at < r.end {
                out.push(at - first_byte);
                at += mss;
            }
        }
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From a stream whose first byte is at 1001 with 1000-byte segments, a receiver that
    /// sends D-SACKs: [3001, 4001) sent again twice (lost twice), [5001, 7001) sent again in
    /// one segment (two traced segments lost), [8001, 9001) sent again and D-SACKed,
    /// [9001, 10001) sent again after the ACK had passed 9501 (only 9501.. counts), and
    /// [10001, 11001) found unnecessary by the duplicate-ACK test, which a D-SACK receiver's
    /// log does not believe.
    #[test]
    fn lists_each_lost_transmission_less_dsacked_and_acked_ones() {
        let mut log = LossLog::default();
        log.retransmitted(3001, 4001, 2001);
        log.retransmitted(5001, 7001, 2001);
        log.retransmitted(3001, 4001, 2001);
        log.retransmitted(8001, 9001, 2001);
        log.dsack(8001, 9001);
        assert_eq!(log.retransmitted(9001, 10001, 9501), Some(4));
        assert_eq!(log.retransmitted(9001, 9501, 9501), None, "all acknowledged: not lost");
        let dup = log.retransmitted(10001, 11001, 2001).unwrap();
        log.dupack(dup);
        assert_eq!(log.offsets(1001, 1000), vec![2000, 2000, 4000, 5000, 8500, 9000]);
    }

    /// Without any D-SACK the duplicate-ACK test decides; a D-SACK marks only the latest
    /// copy of a range sent twice, the earlier one stays a loss.
    #[test]
    fn without_dsack_the_dupack_test_decides_and_a_dsack_takes_back_one_copy() {
        let mut log = LossLog::default();
        let tlp = log.retransmitted(5001, 6001, 1001).unwrap();
        log.retransmitted(2001, 3001, 1001);
        log.dupack(tlp);
        assert_eq!(log.offsets(1001, 1000), vec![1000]);
        let mut log = LossLog::default();
        log.retransmitted(1, 1001, 1);
        log.retransmitted(1, 1001, 1);
        log.dsack(1, 1001);
        assert_eq!(log.offsets(1, 1000), vec![0]);
    }
}
