//! What an endpoint reports: [`Event`]s for the application and [`Stats`] counters for
//! results.
//!
//! This module owns only the data types; the endpoint decides when events happen and keeps
//! the counters up to date.

use pathtwin_core::time::Duration;

/// Something the application (or the driver) should know about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The three-way handshake completed.
    Connected,
    /// `bytes` more bytes were delivered in order since the previous `Received`.
    Received { bytes: u64 },
    /// Every byte written with [`crate::Endpoint::send`] so far has been acknowledged
    /// (the send buffer drained). Reported once per time it becomes true.
    AllAcked,
    /// The peer's FIN arrived in order: it will send no more data.
    PeerClosed,
    /// Both directions are finished: our FIN was acknowledged and the peer's FIN received.
    /// Reported on entering TIME-WAIT (or CLOSED from LAST-ACK), not at its end.
    Closed,
    /// The peer reset the connection.
    Reset,
}

/// Counters for one endpoint. Byte counts are payload bytes; "segments" count every
/// segment put on the wire, including pure ACKs and SYN/FIN/RST segments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Payload bytes retransmitted.
    pub bytes_retransmitted: u64,
    /// Payload bytes cumulatively acknowledged by the peer.
    pub bytes_acked: u64,
    /// Payload bytes delivered in order to the application.
    pub bytes_delivered: u64,
    pub segments_sent: u64,
    /// Segments carrying payload (retransmissions included).
    pub data_segments_sent: u64,
    /// Segments without payload, SYN, FIN or RST: pure acknowledgments.
    pub pure_acks_sent: u64,
    pub segments_received: u64,
    /// Segments (data or FIN) retransmitted, for any reason; SYN retransmissions excluded.
    pub retransmits: u64,
    /// Fast retransmits: loss-recovery episodes started by duplicate ACKs or SACK.
    pub fast_retransmits: u64,
    /// Retransmission-timer expiries, SYN and SYN-ACK timeouts included.
    pub timeouts: u64,
    /// Retransmissions that RACK found lost (RFC 8985 §6), or without RACK the
    /// `lost_retransmit` rule (Linux 2.6's), and sent again without a timeout.
    pub lost_retransmissions: u64,
    /// Tail loss probes sent (RFC 8985 §7).
    pub tail_loss_probes: u64,
    /// Duplicate ACKs received (RFC 5681 definition; with SACK, RFC 6675's).
    pub dupacks_received: u64,
    /// Responses to ECN-Echo (RFC 3168 §6.1.2), at most one per window of data: the
    /// controller was told through `CongestionControl::on_ecn` (BBR v1 ignores it) and CWR
    /// went out. Echoes during loss recovery, already reduced for, are not counted.
    pub ecn_reductions: u64,
    /// Data segments received with the IP ECN field set to CE (RFC 3168 §6.1.3).
    pub ce_received: u64,
    /// Smallest valid RTT sample.
    pub rtt_min: Option<Duration>,
    /// Sum and count of valid RTT samples, for the mean.
    pub rtt_sum: Duration,
    pub rtt_count: u64,
    /// Smoothed RTT after the latest sample.
    pub srtt: Option<Duration>,
}

impl Stats {
    /// Mean of the valid RTT samples.
    pub fn rtt_mean(&self) -> Option<Duration> {
        (self.rtt_count > 0).then(|| Duration::from_nanos(self.rtt_sum.as_nanos() / self.rtt_count))
    }

    pub(crate) fn on_rtt_sample(&mut self, r: Duration, srtt: Option<Duration>) {
        self.rtt_min = Some(self.rtt_min.map_or(r, |m| m.min(r)));
        self.rtt_sum += r;
        self.rtt_count += 1;
        self.srtt = srtt;
    }
}
