//! One TCP connection seen from the capture point, and the Monkey See inferences on it.
//!
//! Owns the per-connection state machine (handshake, data, termination) and the online
//! inferences of Cheng et al., "Monkey See, Monkey Do", USENIX ATC 2004, §3.2, with the
//! details of `ALGORITHMS.md` §5. Everything is computed packet by packet in capture order,
//! with memory bounded by the data in flight, so a connection's cost does not grow with its
//! length. Finding the connection a packet belongs to is `tracker`'s job; turning the state
//! into an output row is `record`'s.
//!
//! Vocabulary: the *server* is the passive opener (or `--server`); *downstream* is server to
//! client, the direction whose path Monkey models (its assumption 3: all loss and queueing
//! happen there); the capture point sits next to the server.
//!
//! Definitions, with their sources:
//! - **Retransmission** (tcptrace `rexmit.c`): a segment any of whose sequence space (SYN and
//!   FIN count one each) was seen before; zero-window probes (data sent while the other side
//!   advertises a zero window) excepted. A probe's bytes are not *unique* either (tcptrace's
//!   `trace.c`): the sender sends them again once the window opens, and they count then.
//! - **SYN RTT** (tcptrace's a->b "RTT from 3WHS"): the client's SYN to the server's answer,
//!   a SYN-ACK or, for a refused connection, the RST-ACK acknowledging the SYN — either
//!   answer takes one round trip; only if the SYN was sent once (Karn).
//! - **Min RTT** (Monkey): SYN-ACK to the client's ACK of it; used only if the SYN-ACK was
//!   sent once (Karn). RTT samples: server segment to the ACK ending exactly at its end,
//!   never for retransmitted segments (Karn's rule).
//! - **Spurious retransmissions**: D-SACK blocks (RFC 2883) when SACK is in use; otherwise
//!   Monkey's heuristic, a duplicate ACK answering a retransmission, where the answering ACK
//!   is the one echoing the retransmission's TSval if timestamps are on (as Eifel does,
//!   RFC 3522), else the first ACK at least one min RTT after it.
//! - **Loss rate** (Monkey): (retransmissions − spurious) / server data packets.
//! - **Bottleneck bandwidth** (Monkey, ACK pairs): bytes newly acknowledged by an ACK over
//!   its gap to the previous ACK, when the segments it acknowledges were sent back to back
//!   with those of the previous ACK (same burst: no client packet and at most
//!   [`BURST_GAP_NS`] between them) or — a proposal [P] for long flows, where Linux's
//!   delayed ACKs make every ACK close a burst — were sent at least one min RTT before the
//!   previous ACK arrived, so they were queued at the bottleneck behind its data. Pairs over
//!   a retransmission or closer than [`MIN_ACK_GAP_NS`] are discarded; the estimate is the
//!   mode of a log-binned histogram, the median below three samples.
//! - **Delayed-ACK policy** (Monkey): data packets per ACK before the first retransmission;
//!   timeout: median over lone segments of (ACK time − send time − min RTT).
//! - **Receiver window** (Monkey): the window of the first client data packet, scaled.
//! - **Response time** (Monkey §5.1), for every exchange of a persistent connection: first
//!   byte of the request to the last byte of the response; **response delay**: last request
//!   packet to first response packet; **query delay**: Monkey's walk over the response's
//!   segments (gap with the previous segment acknowledged, or previous segment shorter than
//!   the MSS), [`QUERY_GAP_NS`] being [P], the gap running from the ACK that covered the
//!   previous segment when that came later [P] (an ACK-clocked slow start is no query); the
//!   response bytes before the segment the walk
//!   stops at are the **header**, the rest the results (Monkey's header/results split).
//!   **Think time**, what a replayed client waits before its next request: the previous
//!   response's last byte to the request's first.
//! - **Timeouts** [R]: a retransmission starting at the cumulative ACK with fewer than three
//!   duplicate ACKs and no SACK since the ACK last advanced.
//! - **Per-direction path estimates** (`direction`, for `trace to-paths`): capacity from
//!   same-burst ACK pairs and ABW, queue and loss from delivery rounds server to client; the
//!   same client to server from client data seen at its receiver (pairs of one TSval,
//!   one-way delays from the client's timestamps, holes filled by retransmissions).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::net::IpAddr;

use pathtwin_core::topology::monkey_pipe_queues;
use pathtwin_core::units::{QueueLimit, Rate};

use crate::decode::{flags, TcpHeader, TcpOptions};
use crate::direction::{flag, PairPool, Rounds};
use crate::seq::{SeenRanges, Unwrapper};
use crate::stats::Summary;

/// Two server segments more than this apart were not sent back to back [P]: above the
/// scheduling jitter of a busy server, below the packet time of a 10 Mb/s bottleneck.
pub const BURST_GAP_NS: u64 = 1_000_000;
/// ACK pairs closer than this are discarded (ALGORITHMS.md §5: timer granularity).
pub const MIN_ACK_GAP_NS: u64 = 100_000;
/// An idle gap this long in a response may separate header and results (ALGORITHMS.md §5 [P]).
pub const QUERY_GAP_NS: u64 = 10_000_000;
/// Histogram resolution for the bandwidth mode: 20 bins per decade (12 % wide).
const BW_BINS_PER_DECADE: f64 = 20.0;
/// Duplicate ACKs that start fast retransmit (RFC 5681).
const DUPTHRESH: u32 = 3;

/// Index of the client-to-server direction in per-direction arrays.
pub const UP: usize = 0;
/// Index of the server-to-client direction.
pub const DOWN: usize = 1;

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// Both sides sent a FIN.
    Fin,
    /// Either side sent a RST.
    Rst,
    /// Neither: the capture ended first, or a FIN went one way only.
    Incomplete,
}

/// One direction's sender-side state.
#[derive(Debug, Clone)]
pub struct Half {
    seq: Option<Unwrapper>,
    seen: SeenRanges,
    pub packets: u64,
    pub data_packets: u64,
    pub payload_bytes: u64,
    pub unique_bytes: u64,
    pub retrans_packets: u64,
    pub retrans_bytes: u64,
    pub syn_count: u32,
    pub fin_count: u32,
    pub rst_count: u32,
    pub zero_window_probes: u64,
    /// Options of this side's SYN.
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
    /// Last advertised window (unscaled field).
    pub last_window: u16,
    /// Highest cumulative ACK this side sent, in the other side's stream; 0 before any.
    pub ack_high: u64,
    /// Stream position of this side's FIN.
    pub fin_pos: Option<u64>,
    pub first_data_ns: Option<u64>,
    pub last_data_ns: Option<u64>,
}

impl Half {
    fn new() -> Self {
        Half {
            seq: None,
            seen: SeenRanges::default(),
            packets: 0,
            data_packets: 0,
            payload_bytes: 0,
            unique_bytes: 0,
            retrans_packets: 0,
            retrans_bytes: 0,
            syn_count: 0,
            fin_count: 0,
            rst_count: 0,
            zero_window_probes: 0,
            mss: None,
            wscale: None,
            sack_permitted: false,
            timestamps: false,
            last_window: u16::MAX,
            ack_high: 0,
            fin_pos: None,
            first_data_ns: None,
            last_data_ns: None,
        }
    }

    /// Unwraps a sequence number of this direction, anchoring the stream at the first one.
    fn unwrap(&mut self, seq: u32) -> u64 {
        self.seq.get_or_insert_with(|| Unwrapper::new(seq)).unwrap(seq)
    }

    fn peek(&self, seq: u32) -> Option<u64> {
        self.seq.map(|u| u.peek(seq))
    }

    /// Whether a SYN was seen and the stream has no holes left.
    pub fn sequence_complete(&self) -> bool {
        self.syn_count > 0 && self.seen.holes() <= 1
    }
}

/// A server segment not yet cumulatively acknowledged. 32 bytes, not the 48 of a field per
/// value: one is written into the connection's `in_flight` ring per server segment, and
/// with hundreds of connections interleaved that store missed the cache on a fifth of all
/// `on_segment` samples. The lengths fit in 32 bits: a segment's span is at most an IP
/// packet's payload plus SYN and FIN.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    start: u64,
    sent_ns: u64,
    burst: u64,
    /// `end - start`.
    len: u32,
    /// IP length of the segment (ACK-pair samples count IP bytes, as a link's rate does), in
    /// the low 31 bits; the top bit says the segment was retransmitted.
    wire_retx: u32,
}

const RETX_BIT: u32 = 1 << 31;

impl InFlight {
    fn new(start: u64, end: u64, sent_ns: u64, retransmitted: bool, burst: u64, wire: u64) -> Self {
        // An IP length is below 2^17: the flag bit is free.
        let wire_retx = (wire as u32 & !RETX_BIT) | if retransmitted { RETX_BIT } else { 0 };
        InFlight { start, sent_ns, burst, len: (end - start) as u32, wire_retx }
    }

    fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    fn wire(&self) -> u64 {
        (self.wire_retx & !RETX_BIT) as u64
    }

    fn retransmitted(&self) -> bool {
        self.wire_retx & RETX_BIT != 0
    }

    fn mark_retransmitted(&mut self) {
        self.wire_retx |= RETX_BIT;
    }

    /// Drops the bytes before `pos` (acknowledged), keeping the end.
    fn advance_start(&mut self, pos: u64) {
        let end = self.end();
        self.start = pos;
        self.len = (end - pos) as u32;
    }
}

/// A retransmission waiting for the ACK that answers it (Monkey's spurious test).
#[derive(Debug, Clone, Copy)]
struct PendingRetrans {
    sent_ns: u64,
    tsval: Option<u32>,
    /// Its entry in [`Downstream::losses`], if it was logged.
    logged: Option<usize>,
}

/// One request/response exchange, delimited by the direction of new data: the client's
/// new data after the server's (or first of all) starts one. Times are those of the first
/// and last segments carrying new data; retransmissions move neither.
#[derive(Debug, Clone, Copy, Default)]
pub struct Exchange {
    pub request_start_ns: u64,
    pub request_end_ns: u64,
    /// New unique client payload bytes (tcptrace's "unique bytes"): a retransmitted or
    /// zero-window-probe byte counts once, when first delivered. Bytes that are new only in
    /// part of a segment (a retransmission carrying more) count for the exchange under way.
    pub request_bytes: u64,
    pub response_start_ns: Option<u64>,
    pub response_end_ns: Option<u64>,
    /// New unique server payload bytes, counted as `request_bytes` are. Server data before
    /// the first request (a banner) belongs to no exchange.
    pub response_bytes: u64,
    /// Response bytes before the first result segment of Monkey's walk (the header); `None`
    /// when the walk found no split.
    pub header_bytes: Option<u64>,
    pub query_delay_ns: Option<u64>,
    /// Server stream position just past the response's new bytes.
    pub response_end_pos: u64,
    /// When a client ACK first covered the whole response: the client had it all half an
    /// RTT earlier. A replay times the client's next move from this, not from
    /// `response_end_ns`, which on a slow link precedes the client's receipt by the queue's
    /// drain time.
    pub response_acked_ns: Option<u64>,
}

/// State of Monkey's query-delay walk over the response of the exchange under way.
#[derive(Debug, Clone, Copy)]
struct QueryWalk {
    first_ns: u64,
    prev_ns: u64,
    prev_end: u64,
    prev_len: u32,
}

/// The inference state of the downstream (server-to-client) path.
#[derive(Debug, Clone)]
pub struct Downstream {
    in_flight: VecDeque<InFlight>,
    burst: u64,
    last_send_ns: Option<u64>,
    client_spoke_since_send: bool,
    /// Previous ACK that advanced: time, and burst and send time of its last segment.
    prev_ack: Option<(u64, u64, u64)>,
    /// When the client's cumulative ACK last advanced.
    last_advance_ns: u64,
    pub rtt: Summary,
    pub bandwidth: Summary,
    pub dupacks_since_advance: u32,
    sack_since_advance: bool,
    pub dsack_blocks: u64,
    pub dupack_spurious: u64,
    pending: VecDeque<PendingRetrans>,
    pub timeouts: u64,
    pub timeout_min_ns: Option<u64>,
    /// Before the first retransmission: new data packets and ACKs that advanced.
    pub pre_loss_data: u64,
    pub pre_loss_acks: u64,
    loss_seen: bool,
    pub delack: Summary,
    /// First transmissions of data (send time, wire bytes, stream start), the first
    /// [`QUEUE_LOG`] of them: the input of [`Conn::queue_explained_losses`].
    sends: SendLog,
    /// Stream starts of retransmitted segments (the first [`QUEUE_LOG`]).
    retransmitted: Vec<u64>,
    /// Retransmitted data ranges and which were spurious: the lost offsets (`losses`).
    pub losses: crate::losses::LossLog,
    /// Capacity pairs (`direction`): ACK pairs of one burst before the first retransmission.
    /// Boxed, as `rounds` and [`Conn::up`] are: the per-packet fields stay together in a few
    /// cache lines.
    pub cap: Box<PairPool>,
    /// Delivery rounds (`direction`): acknowledged bytes, clean RTT samples, what the
    /// server did. Read through [`Downstream::rounds`].
    rounds: Box<Rounds>,
    /// Flags (`direction::flag`) the server's sends raised on the round under way since
    /// the last delivery, handed to `rounds` with the next one: the round under way is
    /// the same until then, and a send then need not touch `rounds`' allocation (under
    /// cachegrind, 0.72 M first-level misses on a 1.2M-packet capture).
    round_flags: u8,
    /// Whether the last new data segment ended short of a full segment (or of a whole
    /// number of them, for a TSO super-packet): the server's send buffer had run dry.
    short_tail: bool,
    /// The latest clean RTT sample (ns): the queue's state when a loss is found.
    last_clean_rtt: Option<u64>,
    /// Largest IP length of a server data segment: a full-sized packet.
    pub max_wire: u64,
}

impl Downstream {
    /// The delivery rounds, with the flags of the sends since the last delivery raised on
    /// the round under way.
    pub fn rounds(&self) -> Cow<'_, Rounds> {
        if self.round_flags == 0 {
            return Cow::Borrowed(&self.rounds);
        }
        let mut r = Rounds::clone(&self.rounds);
        r.flag(self.round_flags);
        Cow::Owned(r)
    }
}

/// The inference state of the upstream (client-to-server) path, seen at its receiver: the
/// `direction` estimates from client data.
#[derive(Debug, Clone, Default)]
pub struct Upstream {
    /// Capacity pairs: consecutive new client segments with the same TSval, before the
    /// first upstream loss.
    pub cap: PairPool,
    /// Delivery rounds: new client bytes, one-way delays from the client's timestamps.
    pub rounds: Rounds,
    /// The client's first TSval on data: one-way delays are taken relative to it.
    ts0: Option<u32>,
    /// The previous in-order new client segment: arrival time, TSval, and whether it was
    /// full-sized (a short one ends an application write: the next need not follow it
    /// back to back, whatever its TSval).
    prev: Option<(u64, Option<u32>, bool)>,
    /// TSval of the client's highest segment so far.
    ts_high: Option<u32>,
    /// An open hole in the client's stream: when it opened, and the one-way delay of the
    /// segment that jumped past it (the queue's state at the loss).
    hole: Option<(u64, Option<i64>)>,
    loss_seen: bool,
    /// Largest IP length of a client data segment.
    pub max_wire: u64,
}

/// The first transmissions of a connection's server segments, [`Downstream::sends`]: 16
/// bytes an entry instead of 24. Every connection of a capture keeps one until it is
/// retired, and the fresh heap pages they fill (each first touch a page fault that clears
/// a page) were the analysis's largest cost after `on_segment` itself. A stream position
/// is kept as its low 32 bits, the high bits once per run of entries sharing them: a
/// stream crosses a 4 GB boundary rarely, so that list stays a few entries long and every
/// position reads back exactly.
#[derive(Debug, Clone, Default)]
struct SendLog {
    /// (send time, wire bytes, low 32 bits of the stream start).
    entries: Vec<(u64, u32, u32)>,
    /// (index of the first entry, high 32 bits of the starts from there on).
    high: Vec<(u32, u32)>,
    /// The last run's high bits, beside the entries' pointer: comparing with `high`'s last
    /// would read one more allocation, out of cache, on every push.
    last_high: u32,
}

impl SendLog {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn push(&mut self, sent_ns: u64, wire: u32, start: u64) {
        let hi = (start >> 32) as u32;
        if hi != self.last_high || self.entries.is_empty() {
            self.high.push((self.entries.len() as u32, hi));
            self.last_high = hi;
        }
        self.entries.push((sent_ns, wire, start as u32));
    }

    /// The entries as (send time, wire bytes, stream start), in order.
    fn iter(&self) -> impl Iterator<Item = (u64, u32, u64)> + '_ {
        let mut run = 0;
        self.entries.iter().enumerate().map(move |(i, &(t, wire, lo))| {
            while run + 1 < self.high.len() && self.high[run + 1].0 as usize <= i {
                run += 1;
            }
            (t, wire, (self.high[run].1 as u64) << 32 | lo as u64)
        })
    }
}

/// Segments of a connection that the bottleneck-queue replay of
/// [`Conn::queue_explained_losses`] looks at: Monkey's flows are 3-20 packets, and a
/// connection's cost must not grow with its length.
pub const QUEUE_LOG: usize = 1024;

/// A connection and everything inferred about it so far.
#[derive(Debug, Clone)]
pub struct Conn {
    pub index: u64,
    pub client: (IpAddr, u16),
    pub server: (IpAddr, u16),
    /// Whether the roles come from a SYN or `--server`, not from the port heuristic.
    pub roles_known: bool,
    pub half: [Half; 2],
    pub first_ns: u64,
    pub last_ns: u64,
    syn_ns: Option<u64>,
    synack_ns: Option<u64>,
    /// SYN to SYN-ACK at the capture point (the capture-to-server part of the RTT).
    pub syn_rtt_ns: Option<u64>,
    /// SYN-ACK to the client's ACK: Monkey's min-RTT estimate.
    pub handshake_rtt_ns: Option<u64>,
    pub handshake_complete: bool,
    pub rst_ns: Option<u64>,
    pub down: Downstream,
    pub up: Box<Upstream>,
    /// Client window of the first request packet, scaled.
    pub request_rwin: Option<u64>,
    /// Largest window the client advertised after the handshake, scaled: above
    /// `request_rwin` when its buffer grows (Linux's autotuning).
    pub client_rwin_max: u64,
    pub exchanges: Vec<Exchange>,
    /// Which side sent the last new data: `UP`, `DOWN` or none yet.
    data_turn: Option<usize>,
    /// The walk over the last exchange's response, until it finds the split.
    query: Option<QueryWalk>,
    pub http_method: Option<String>,
    pub http_status: Option<u16>,
}

impl Conn {
    pub fn new(index: u64, client: (IpAddr, u16), server: (IpAddr, u16), roles_known: bool, now: u64) -> Self {
        Conn {
            index,
            client,
            server,
            roles_known,
            half: [Half::new(), Half::new()],
            first_ns: now,
            last_ns: now,
            syn_ns: None,
            synack_ns: None,
            syn_rtt_ns: None,
            handshake_rtt_ns: None,
            handshake_complete: false,
            rst_ns: None,
            down: Downstream {
                in_flight: VecDeque::new(),
                burst: 0,
                last_send_ns: None,
                client_spoke_since_send: false,
                prev_ack: None,
                last_advance_ns: 0,
                rtt: Summary::new(index.wrapping_mul(2) + 1),
                bandwidth: Summary::new(index.wrapping_mul(2) + 2),
                dupacks_since_advance: 0,
                sack_since_advance: false,
                dsack_blocks: 0,
                dupack_spurious: 0,
                pending: VecDeque::new(),
                timeouts: 0,
                timeout_min_ns: None,
                pre_loss_data: 0,
                pre_loss_acks: 0,
                loss_seen: false,
                delack: Summary::new(index.wrapping_mul(3) + 1),
                sends: SendLog::default(),
                retransmitted: Vec::new(),
                losses: Default::default(),
                cap: Box::default(),
                rounds: Box::default(),
                round_flags: 0,
                short_tail: false,
                last_clean_rtt: None,
                max_wire: 0,
            },
            up: Box::new(Upstream { rounds: Rounds::through_recovery(), ..Upstream::default() }),
            request_rwin: None,
            client_rwin_max: 0,
            exchanges: Vec::new(),
            data_turn: None,
            query: None,
            http_method: None,
            http_status: None,
        }
    }

    /// How the connection ended so far.
    pub fn termination(&self) -> Termination {
        if self.half[UP].rst_count + self.half[DOWN].rst_count > 0 {
            Termination::Rst
        } else if self.half[UP].fin_count > 0 && self.half[DOWN].fin_count > 0 {
            Termination::Fin
        } else {
            Termination::Incomplete
        }
    }

    /// Whether a new SYN on this 4-tuple starts a new connection rather than repeating ours.
    pub fn is_reused_by(&self, syn_seq: u32) -> bool {
        match self.half[UP].peek(syn_seq) {
            _ if self.half[UP].syn_count == 0 => true,
            Some(pos) => self.termination() != Termination::Incomplete || pos != crate::seq::ORIGIN,
            None => true,
        }
    }

    /// The effective window scale of `dir`'s advertisements (RFC 7323: only if both SYNs
    /// carried the option).
    fn wscale(&self, dir: usize) -> u8 {
        match (self.half[dir].wscale, self.half[1 - dir].wscale) {
            (Some(s), Some(_)) => s.min(14),
            _ => 0,
        }
    }

    /// The payload of a full-sized downstream segment: the client's MSS less the timestamp
    /// option when both sides use it; 536 (RFC 9293) without an MSS option.
    pub fn downstream_mss(&self) -> u32 {
        let mss = self.half[UP].mss.unwrap_or(536) as u32;
        if self.half[UP].timestamps && self.half[DOWN].timestamps {
            mss.saturating_sub(12)
        } else {
            mss
        }
    }

    /// Min RTT: the handshake's if known, else the smallest Karn sample.
    pub fn min_rtt_ns(&self) -> Option<u64> {
        let karn = self.down.rtt.min().map(|x| x as u64);
        match (self.handshake_rtt_ns, karn) {
            (Some(h), Some(k)) => Some(h.min(k)),
            (h, k) => h.or(k),
        }
    }

    /// Processes one segment travelling in direction `dir` at time `now` (ns).
    pub fn on_segment(&mut self, dir: usize, now: u64, tcp: &TcpHeader<'_>, payload: &[u8], wire_len: u32) {
        let opts = tcp.options();
        self.last_ns = self.last_ns.max(now);
        self.first_ns = self.first_ns.min(now);
        let syn = tcp.has(flags::SYN);
        let fin = tcp.has(flags::FIN);
        let len = tcp.payload_len as u64;
        {
            let h = &mut self.half[dir];
            h.packets += 1;
            if syn {
                h.syn_count += 1;
                h.mss = opts.mss.or(h.mss);
                h.wscale = opts.wscale.or(h.wscale);
                h.sack_permitted |= opts.sack_permitted;
                h.timestamps |= opts.timestamp.is_some();
            }
            if fin {
                h.fin_count += 1;
            }
            if tcp.has(flags::RST) {
                h.rst_count += 1;
                self.rst_ns.get_or_insert(now);
            }
        }
        self.on_handshake(dir, now, tcp);

        // Sequence space: SYN and FIN occupy one number each (tcptrace counts them too).
        let start = self.half[dir].unwrap(tcp.seq);
        let span = len + syn as u64 + fin as u64;
        let mut retrans_bytes = 0;
        let mut retrans_data = 0;
        let other_window_zero = self.half[1 - dir].last_window == 0 && self.half[1 - dir].packets > 0;
        let probe = other_window_zero && len > 0;
        // Only client data reads it (`on_client_data`): an ACK need not touch the ranges.
        let high_before = if dir == UP && len > 0 { self.half[UP].seen.high() } else { 0 };
        if span > 0 {
            let h = &mut self.half[dir];
            if probe {
                // A zero-window probe: not a retransmission, whatever its sequence number,
                // and not yet delivered data either.
                h.zero_window_probes += 1;
            } else {
                // SYN, data and FIN in turn: the same total as the whole span at once, with
                // the data's share apart. A FIN sent alone and then again behind the data
                // before it (tcptrace's single_byte_rexmit.dmp) retransmits no data.
                let data_start = start + syn as u64;
                if syn {
                    retrans_bytes += h.seen.insert(start, data_start);
                }
                retrans_data = h.seen.insert(data_start, data_start + len);
                retrans_bytes += retrans_data;
                if fin {
                    retrans_bytes += h.seen.insert(data_start + len, data_start + len + 1);
                }
            }
            if fin {
                h.fin_pos = Some(start + syn as u64 + len);
            }
        }
        let is_retrans = retrans_bytes > 0;
        if len > 0 {
            let h = &mut self.half[dir];
            h.data_packets += 1;
            h.payload_bytes += len;
            h.first_data_ns.get_or_insert(now);
            h.last_data_ns = Some(now);
            // Unique bytes exclude the SYN and FIN sequence numbers (tcptrace).
            if !probe {
                h.unique_bytes += len - retrans_data;
            }
        }
        if is_retrans {
            self.half[dir].retrans_packets += 1;
            self.half[dir].retrans_bytes += retrans_bytes;
        }
        self.half[dir].last_window = tcp.window;
        // A SYN's window is never scaled (RFC 7323 §2.2); the handshake's windows are not
        // the buffer's.
        if dir == UP && !tcp.has(flags::SYN) && self.handshake_complete {
            let w = (tcp.window as u64) << self.wscale(UP);
            self.client_rwin_max = self.client_rwin_max.max(w);
        }

        if len > 0 && !is_retrans && !probe {
            self.on_new_data(dir, now, tcp, payload);
        }
        // After `on_new_data`: a request's first segment opens its exchange there, and the
        // walk there reads the response bytes before this segment.
        let fresh = if probe { 0 } else { len - retrans_data };
        if fresh > 0 {
            if let Some(x) = self.exchanges.last_mut() {
                *if dir == UP { &mut x.request_bytes } else { &mut x.response_bytes } += fresh;
            }
        }
        if dir == DOWN {
            if (len > 0 || fin) && !probe {
                self.on_server_send(now, start, start + span, is_retrans, tcp, &opts, wire_len as u64);
            }
        } else {
            self.down.client_spoke_since_send = true;
            if tcp.has(flags::ACK) {
                self.on_client_ack(now, tcp, &opts, len > 0 || syn || fin);
            }
            if len > 0 && !probe {
                self.on_client_data(now, start + syn as u64, len, fresh, high_before, &opts, wire_len as u64);
            }
        }
        if dir == DOWN && tcp.has(flags::ACK) {
            let ack = self.half[UP].peek(tcp.ack);
            if let Some(a) = ack {
                let h = &mut self.half[DOWN];
                h.ack_high = h.ack_high.max(a);
            }
        }
    }

    fn on_handshake(&mut self, dir: usize, now: u64, tcp: &TcpHeader<'_>) {
        let syn = tcp.has(flags::SYN);
        let ack = tcp.has(flags::ACK);
        if dir == UP && syn && !ack {
            self.syn_ns = Some(now);
        } else if dir == DOWN && syn && ack {
            if let (Some(s), 1) = (self.syn_ns, self.half[UP].syn_count) {
                // Karn: only a SYN sent once gives an unambiguous sample.
                if self.half[DOWN].syn_count == 1 {
                    self.syn_rtt_ns = Some(now.saturating_sub(s));
                }
            }
            self.synack_ns = Some(now);
        } else if dir == DOWN && ack && tcp.has(flags::RST) && self.syn_rtt_ns.is_none() {
            // A refused connection: the RST-ACK answering the SYN is its round trip.
            let answers_syn = self.half[UP].peek(tcp.ack) == Some(crate::seq::ORIGIN + 1);
            if let (Some(s), 1, true) = (self.syn_ns, self.half[UP].syn_count, answers_syn) {
                self.syn_rtt_ns = Some(now.saturating_sub(s));
            }
        } else if dir == UP && ack && !syn && !self.handshake_complete {
            if let Some(sa) = self.synack_ns {
                let acks_synack = self.half[DOWN].peek(tcp.ack) == Some(crate::seq::ORIGIN + 1);
                if acks_synack {
                    self.handshake_complete = self.half[UP].syn_count > 0;
                    if self.half[DOWN].syn_count == 1 {
                        self.handshake_rtt_ns = Some(now.saturating_sub(sa));
                    }
                }
            }
        }
    }

    /// New (not retransmitted) payload: request/response exchanges and HTTP.
    fn on_new_data(&mut self, dir: usize, now: u64, tcp: &TcpHeader<'_>, payload: &[u8]) {
        if dir == UP {
            if self.request_rwin.is_none() {
                self.request_rwin = Some((tcp.window as u64) << self.wscale(UP));
            }
            if self.data_turn != Some(UP) {
                self.exchanges.push(Exchange { request_start_ns: now, request_end_ns: now, ..Default::default() });
                if self.http_method.is_none() {
                    self.http_method = http_method(payload).map(str::to_string);
                }
            } else if let Some(x) = self.exchanges.last_mut() {
                x.request_end_ns = now;
            }
            self.data_turn = Some(UP);
        } else {
            let first_of_response = self.data_turn != Some(DOWN);
            if first_of_response && self.http_status.is_none() {
                self.http_status = http_status(payload);
            }
            let start = self.half[DOWN].peek(tcp.seq).unwrap_or(0);
            let end = start + tcp.payload_len as u64;
            if let Some(x) = self.exchanges.last_mut() {
                if x.response_start_ns.is_none() {
                    x.response_start_ns = Some(now);
                }
                x.response_end_ns = Some(now);
                if end > x.response_end_pos {
                    // More response: an ACK of the part before it was not the end.
                    x.response_end_pos = end;
                    x.response_acked_ns = None;
                }
            }
            let mss = self.downstream_mss();
            let acked = self.half[UP].ack_high;
            let window_open = self.half[UP].last_window > 0;
            // Monkey's walk, once per exchange: it starts at the response's first segment
            // and ends at the first result segment.
            if first_of_response {
                self.query = (!self.exchanges.is_empty())
                    .then_some(QueryWalk { first_ns: now, prev_ns: now, prev_end: end, prev_len: tcp.payload_len });
            } else if let Some(q) = self.query.as_mut() {
                // Monkey's test on the pair (previous, current), with the gap counted from
                // the later of the previous segment and the ACK that covered it [P]: a
                // segment sent as that ACK opened the window is ACK-clocked, not held by the
                // application (Monkey's gap alone splits a slow start from an initial
                // window of one segment at its first round trip).
                let idle_from = q.prev_ns.max(self.down.last_advance_ns);
                let idle = now.saturating_sub(idle_from) > QUERY_GAP_NS && acked >= q.prev_end && window_open;
                if idle || q.prev_len < mss {
                    let first_ns = q.first_ns;
                    self.query = None;
                    if let Some(x) = self.exchanges.last_mut() {
                        x.query_delay_ns = Some(now.saturating_sub(first_ns));
                        // This segment's bytes are not counted yet (`on_segment` adds them
                        // after this call): what is counted is the header.
                        x.header_bytes = Some(x.response_bytes);
                    }
                } else {
                    q.prev_ns = now;
                    q.prev_end = end;
                    q.prev_len = tcp.payload_len;
                }
            }
            self.data_turn = Some(DOWN);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_server_send(&mut self, now: u64, start: u64, end: u64, is_retrans: bool, tcp: &TcpHeader<'_>, opts: &TcpOptions, wire: u64) {
        // The right edge of the client's advertised window, once the handshake set its scale.
        let rwnd_edge = self.handshake_complete.then(|| self.half[UP].ack_high + ((self.half[UP].last_window as u64) << self.wscale(UP)));
        let mss = self.downstream_mss() as u64;
        // Only the idle test below reads it, and only with nothing in flight: most sends
        // need not touch the RTT summary.
        let min_rtt = if self.down.in_flight.is_empty() { self.min_rtt_ns() } else { None };
        let d = &mut self.down;
        let idle_since = d.last_send_ns;
        let new_burst = match d.last_send_ns {
            None => true,
            Some(t) => d.client_spoke_since_send || now.saturating_sub(t) > BURST_GAP_NS,
        };
        if new_burst {
            d.burst += 1;
        }
        d.last_send_ns = Some(now);
        d.client_spoke_since_send = false;
        let tsval = opts.timestamp.map(|t| t.0);
        if end > start {
            if is_retrans {
                if d.retransmitted.len() < QUEUE_LOG {
                    d.retransmitted.push(start);
                }
            } else if d.sends.len() < QUEUE_LOG {
                d.sends.push(now, wire as u32, start);
            }
        }
        if is_retrans {
            d.loss_seen = true;
            d.round_flags |= flag::RETX;
            d.rounds.loss(d.last_clean_rtt.map(|r| r as i64));
            // Mark every in-flight segment this one overlaps: Karn and pair filtering.
            let mut at_una = false;
            for seg in d.in_flight.iter_mut().filter(|s| s.start < end && start < s.end()) {
                seg.mark_retransmitted();
            }
            if let Some(first) = d.in_flight.front() {
                at_una = start <= first.start;
            }
            let una = self.half[UP].ack_high;
            if (at_una || start <= una) && d.dupacks_since_advance < DUPTHRESH && !d.sack_since_advance {
                d.timeouts += 1;
                let last = d.in_flight.iter().filter(|s| s.start < end && start < s.end()).map(|s| s.sent_ns).max();
                if let Some(t) = last {
                    let wait = now.saturating_sub(t);
                    d.timeout_min_ns = Some(d.timeout_min_ns.map_or(wait, |m: u64| m.min(wait)));
                }
            }
            // Data only: the SYN-ACK and the FIN are not listed (`losses`).
            let data_start = start + u64::from(tcp.has(flags::SYN));
            let data_end = data_start + tcp.payload_len as u64;
            let logged = if tcp.payload_len > 0 { d.losses.retransmitted(data_start, data_end, una) } else { None };
            d.pending.push_back(PendingRetrans { sent_ns: now, tsval, logged });
            // Re-sent data keeps its place in the queue; refresh its send time.
            for seg in d.in_flight.iter_mut().filter(|s| s.start < end && start < s.end()) {
                seg.sent_ns = now;
                seg.burst = d.burst;
            }
            let covered = d.in_flight.iter().any(|s| s.start <= start && end <= s.end());
            if !covered && end > start.max(una) {
                insert_sorted(&mut d.in_flight, InFlight::new(start, end, now, true, d.burst, wire));
            }
        } else {
            if !d.loss_seen && tcp.payload_len > 0 {
                d.pre_loss_data += 1;
            }
            if tcp.payload_len > 0 {
                d.max_wire = d.max_wire.max(wire);
                // The application set the pace: more data after a short segment (the send
                // buffer had run dry), or new data after a round trip with nothing in flight.
                let idle = d.in_flight.is_empty() && idle_since.zip(min_rtt).is_some_and(|(t, m)| now.saturating_sub(t) >= m);
                if d.short_tail || idle {
                    d.round_flags |= flag::APP;
                }
                d.short_tail = mss > 0 && tcp.payload_len as u64 % mss != 0;
                // Less than a full segment of the client's window left after this one.
                if rwnd_edge.is_some_and(|e| end + mss > e) {
                    d.round_flags |= flag::RWND;
                }
            }
            insert_sorted(&mut d.in_flight, InFlight::new(start, end, now, false, d.burst, wire));
        }
    }

    /// A client ACK (with or without data) at `now`.
    fn on_client_ack(&mut self, now: u64, tcp: &TcpHeader<'_>, opts: &TcpOptions, carries_sequence: bool) {
        let Some(ack) = self.half[DOWN].peek(tcp.ack) else { return };
        let prev_high = self.half[UP].ack_high;
        let min_rtt = self.min_rtt_ns();
        let sack_on = self.half[UP].sack_permitted && self.half[DOWN].sack_permitted;
        let d = &mut self.down;

        // D-SACK (RFC 2883): a first SACK block below the cumulative ACK, or inside the second.
        if opts.sack_len > 0 {
            // Only the first two blocks matter; no allocation on this per-ACK path.
            let down = &self.half[DOWN];
            let mut blocks = opts.sack[..opts.sack_len as usize]
                .iter()
                .filter_map(|&(l, r)| Some((down.peek(l)?, down.peek(r)?)));
            if let Some((l, r)) = blocks.next() {
                let inside_second = blocks.next().is_some_and(|(l2, r2)| l2 <= l && r <= r2);
                if r <= ack || inside_second {
                    d.dsack_blocks += 1;
                    d.losses.dsack(l, r);
                } else {
                    d.sack_since_advance = true;
                }
            }
        }

        let advanced = ack > prev_high;
        let is_dup = !advanced && ack == prev_high && !carries_sequence;
        if is_dup {
            d.dupacks_since_advance += 1;
            // A duplicate ACK still answers one data packet: counting it keeps the ratio of a
            // quick-ACK receiver at 1 when the first loss is followed by more data.
            if !d.loss_seen && !d.in_flight.is_empty() {
                d.pre_loss_acks += 1;
            }
        }

        // Monkey's spurious-retransmission heuristic, counted only without SACK (with SACK the
        // D-SACK count above is exact). The loss log takes it either way: a receiver that
        // sends no D-SACK (`losses` decides which test a connection's log believes).
        while let Some(p) = d.pending.front().copied() {
            let answers = match (p.tsval, opts.timestamp) {
                (Some(v), Some((_, ecr))) => ecr.wrapping_sub(v) as i32 >= 0,
                _ => min_rtt.is_some_and(|m| now >= p.sent_ns + m),
            };
            if !answers {
                break;
            }
            d.pending.pop_front();
            if is_dup {
                if !sack_on {
                    d.dupack_spurious += 1;
                }
                if let Some(i) = p.logged {
                    d.losses.dupack(i);
                }
            }
        }

        if !advanced {
            return;
        }
        self.half[UP].ack_high = ack;
        // A request that carries this ACK has already opened the next exchange: look at
        // the last two.
        for x in self.exchanges.iter_mut().rev().take(2) {
            if x.response_acked_ns.is_none() && x.response_end_pos > 0 && ack >= x.response_end_pos {
                x.response_acked_ns = Some(now);
            }
        }
        let d = &mut self.down;
        d.last_advance_ns = now;
        d.dupacks_since_advance = 0;
        d.sack_since_advance = false;

        // Segments this ACK completes.
        let mut newly = 0u64;
        let mut any_retrans = false;
        let mut last: Option<InFlight> = None;
        let mut bursts_ok = true;
        let mut count = 0;
        while let Some(seg) = d.in_flight.front().copied() {
            let seg_end = seg.end();
            if seg_end > ack {
                break;
            }
            d.in_flight.pop_front();
            // Whole segments count with their headers; a partly acknowledged one (split by
            // the receiver or by TSO at the capture point) with its remaining bytes only.
            let fresh = seg_end - seg.start.max(prev_high.min(seg_end));
            newly += if fresh == seg_end - seg.start { seg.wire().max(fresh) } else { fresh };
            any_retrans |= seg.retransmitted();
            if let Some(l) = last {
                bursts_ok &= l.burst == seg.burst;
            }
            last = Some(seg);
            count += 1;
        }
        // A partially acknowledged segment (the receiver split it, or TSO at capture).
        if let Some(front) = d.in_flight.front_mut() {
            if front.start < ack {
                front.advance_start(ack);
            }
        }
        let Some(last) = last else { return };
        if !d.loss_seen {
            d.pre_loss_acks += 1;
        }
        // A lone segment (the only one acknowledged, nothing sent after it): a delayed-ACK
        // receiver may have held its ACK.
        let lone = count == 1 && d.in_flight.is_empty();
        // `direction`'s rounds: a clean sample covers no retransmitted segment and is not lone.
        let rtt_ns = now.saturating_sub(last.sent_ns);
        let clean = !any_retrans && last.end() == ack && !lone;
        if clean {
            d.last_clean_rtt = Some(rtt_ns);
        }
        let flags = std::mem::take(&mut d.round_flags) | if any_retrans { flag::RETX } else { 0 };
        d.rounds.deliver(now, newly, clean.then_some((rtt_ns as i64, count)), flags, min_rtt);

        // Karn's rule: sample only segments never retransmitted, acked exactly at their end.
        if !last.retransmitted() && last.end() == ack {
            let sample = now.saturating_sub(last.sent_ns) as f64;
            d.rtt.add(sample);
            // A lone segment: the only one acknowledged and nothing sent after it.
            if count == 1 && d.in_flight.is_empty() {
                if let Some(m) = min_rtt {
                    d.delack.add((sample - m as f64).max(0.0));
                }
            }
        }

        // ACK-pair bandwidth sample against the previous advancing ACK.
        if let Some((prev_ns, prev_burst, prev_sent)) = d.prev_ack {
            let gap = now.saturating_sub(prev_ns);
            let first_sent = last.sent_ns;
            let same_burst = bursts_ok && last.burst == prev_burst;
            let queued_behind = min_rtt.is_some_and(|m| first_sent + m <= prev_ns) && first_sent >= prev_sent;
            if !any_retrans && gap >= MIN_ACK_GAP_NS && (same_burst || queued_behind) && newly > 0 {
                d.bandwidth.add(newly as f64 * 8.0 * 1e9 / gap as f64);
            }
            // Capacity pairs: one burst only, before the first loss, every gap (the pooled
            // ratio needs the short ones of compressed ACKs as much as the long ones), none
            // longer than a round trip (something other than the bottleneck spaced those).
            if same_burst && !any_retrans && !d.loss_seen && !lone && newly > 0 && min_rtt.map_or(true, |m| gap <= m) {
                d.cap.add(prev_burst, newly as f64 * 8.0, gap as f64 / 1e9);
            }
        }
        d.prev_ack = if any_retrans { None } else { Some((now, last.burst, last.sent_ns)) };
    }

    /// New client payload (`len` bytes from `start`, `fresh` of them never seen before; the
    /// client's highest byte was `high_before`) arriving at `now`: the upstream's
    /// `direction` estimates, seen at its receiver.
    // Client data is rare beside ACKs: kept out of line, `on_segment` stays small.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn on_client_data(&mut self, now: u64, start: u64, len: u64, fresh: u64, high_before: u64, opts: &TcpOptions, wire: u64) {
        let min_rtt = self.min_rtt_ns();
        // The right edge of the server's advertised window, and the largest segment it takes.
        let rwnd_edge = self.handshake_complete.then(|| self.half[DOWN].ack_high + ((self.half[DOWN].last_window as u64) << self.wscale(DOWN)));
        let mss = self.half[DOWN].mss.unwrap_or(536) as u64;
        // Full-sized: within the header options' 40 bytes of the server's MSS.
        let full = len + 40 >= mss;
        let all_acked = self.half[DOWN].ack_high >= high_before;
        let holes_left = self.half[UP].seen.holes() > 1;
        let u = &mut self.up;
        let tsval = opts.timestamp.map(|t| t.0);
        // One-way delay up to a constant: arrival less the client's clock (1-ms ticks).
        let delay = tsval.map(|v| {
            let v0 = *u.ts0.get_or_insert(v);
            now as i64 - v.wrapping_sub(v0) as i32 as i64 * 1_000_000
        });
        if fresh == 0 {
            // All seen before: the original arrived, the client thought it lost.
            u.rounds.flag(flag::RETX);
            return;
        }
        u.max_wire = u.max_wire.max(wire);
        let end = start + len;
        let filler = start < high_before;
        let jump = start > high_before;
        let mut flags = 0;
        if filler {
            // A retransmission if sent after the segment above the hole (a later TSval;
            // without timestamps, a min RTT after the hole opened), else a reordered original.
            let lost = match (tsval, u.ts_high) {
                (Some(v), Some(h)) => v.wrapping_sub(h) as i32 > 0,
                _ => u.hole.zip(min_rtt).is_some_and(|((opened, _), m)| now >= opened + m),
            };
            if lost {
                u.rounds.loss(u.hole.and_then(|h| h.1));
                u.loss_seen = true;
                flags |= flag::RETX;
            }
            if !holes_left {
                u.hole = None;
            }
        } else {
            if jump && u.hole.is_none() {
                u.hole = Some((now, delay));
            }
            u.ts_high = tsval.or(u.ts_high);
        }
        if rwnd_edge.is_some_and(|e| end + mss > e) {
            flags |= flag::RWND;
        }
        if let (Some((t, _, _)), Some(m)) = (u.prev, min_rtt) {
            // Idle for a round trip with everything acknowledged: the client had nothing to send.
            if now.saturating_sub(t) > m && all_acked {
                flags |= flag::APP;
            }
        }
        if let (Some((t, Some(pv), true)), Some(v)) = (u.prev, tsval) {
            if v == pv && !filler && !jump && !u.loss_seen {
                u.cap.add(v as u64, wire as f64 * 8.0, now.saturating_sub(t) as f64 / 1e9);
            }
        }
        u.prev = (!filler).then_some((now, tsval, full));
        let bytes = wire * fresh / len.max(1);
        u.rounds.deliver(now, bytes, delay.map(|d| (d, 0)), flags, min_rtt);
    }

    /// The bottleneck bandwidth estimate in bits per second, and its sample count.
    pub fn bandwidth(&self) -> (Option<f64>, u64) {
        let n = self.down.bandwidth.count();
        let est = if n >= 3 { self.down.bandwidth.log_mode(BW_BINS_PER_DECADE) } else { self.down.bandwidth.median() };
        (est, n)
    }

    /// Retransmissions that a drop-tail queue at the bottleneck explains: the server's first
    /// transmissions are replayed into a queue draining at `rate_bps` and holding what
    /// Monkey's pipe rule gives that rate ([`monkey_pipe_queues`]); a segment that would not
    /// have fit and was retransmitted counts. A replay's pipe, built from the same rate and
    /// rule, drops those by itself: adding them to its random loss as well (Monkey's loss
    /// rate does) would lose them twice — on a dial-up client behind a 5-packet queue, a
    /// first window of 10 segments makes that a third of all packets. [P]
    pub fn queue_explained_losses(&self, rate_bps: f64) -> u64 {
        // Only a retransmitted segment can count: without one, no replay.
        if rate_bps.is_nan() || rate_bps <= 0.0 || self.down.retransmitted.is_empty() {
            return 0;
        }
        let limit = match monkey_pipe_queues(Rate::from_bps(rate_bps as u64)).get(0) {
            QueueLimit::Packets(n) => n as usize,
            QueueLimit::Bytes(b) => (b / 1500) as usize,
        };
        let d = &self.down;
        // Departure times of the packets in the queue (the first is in service).
        let mut queue: VecDeque<f64> = VecDeque::new();
        let mut explained = 0;
        for (t, wire, start) in d.sends.iter() {
            let t = t as f64;
            while queue.front().is_some_and(|&dep| dep <= t) {
                queue.pop_front();
            }
            if queue.len() > limit {
                explained += u64::from(d.retransmitted.contains(&start));
                continue;
            }
            let begin = queue.back().copied().unwrap_or(t).max(t);
            queue.push_back(begin + wire as f64 * 8e9 / rate_bps);
        }
        explained
    }

    /// Stream positions of each side's data, for `sequence_complete` checks.
    pub fn stream_end(&self, dir: usize) -> u64 {
        self.half[dir].seen.high()
    }
}

/// Inserts keeping the queue sorted by start (retransmissions and reordering insert early).
fn insert_sorted(q: &mut VecDeque<InFlight>, seg: InFlight) {
    if q.back().map_or(true, |b| b.start <= seg.start) {
        q.push_back(seg);
    } else {
        let i = q.partition_point(|s| s.start <= seg.start);
        q.insert(i, seg);
    }
}

/// The HTTP/1.x method a request payload starts with.
fn http_method(payload: &[u8]) -> Option<&'static str> {
    const METHODS: [&str; 9] = ["GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"];
    METHODS.into_iter().find(|m| payload.len() > m.len() && payload.starts_with(m.as_bytes()) && payload[m.len()] == b' ')
}

/// The status code of an HTTP/1.x status line ("HTTP/1.1 200 OK").
fn http_status(payload: &[u8]) -> Option<u16> {
    if payload.len() < 12 || !payload.starts_with(b"HTTP/1.") || payload[8] != b' ' {
        return None;
    }
    std::str::from_utf8(&payload[9..12]).ok()?.parse().ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    fn seg(flags: u8, seq: u32, ack: u32, window: u16, payload_len: u32) -> TcpHeader<'static> {
        TcpHeader { src_port: 0, dst_port: 0, seq, ack, flags, window, raw_options: &[], payload_len }
    }

    fn conn() -> Conn {
        let ip = IpAddr::from([10, 0, 0, 1]);
        Conn::new(0, (ip, 40000), (ip, 80), true, 0)
    }

    /// Feeds `(time, direction, flags, seq, ack, payload length)` segments; the client's
    /// SYN carries MSS 1460, so a full downstream segment is 1460 bytes (no timestamps).
    fn feed(c: &mut Conn, segs: &[(u64, usize, u8, u32, u32, u32)]) {
        const MSS_1460: [u8; 4] = [2, 4, 5, 180];
        for &(t, dir, fl, seq, ack, len) in segs {
            let mut h = seg(fl, seq, ack, 65535, len);
            if fl & flags::SYN != 0 && dir == UP {
                h.raw_options = &MSS_1460;
            }
            c.on_segment(dir, t, &h, &[], 40 + len);
        }
    }

    /// Client ISN; the request stream starts at `CI + 1`.
    const CI: u32 = 100;
    /// Server ISN; the response stream starts at `SI + 1`.
    const SI: u32 = 5000;

    /// A connection opened by the handshake (SYN at 0, SYN-ACK at 1 ms, ACK at 2 ms), then
    /// fed `rest`.
    fn opened(rest: &[(u64, usize, u8, u32, u32, u32)]) -> Conn {
        use flags::{ACK, SYN};
        let (c, s) = (CI + 1, SI + 1);
        let mut k = conn();
        feed(&mut k, &[(0, UP, SYN, CI, 0, 0), (MS, DOWN, SYN | ACK, SI, c, 0), (2 * MS, UP, ACK, c, s, 0)]);
        feed(&mut k, rest);
        k
    }

    /// A persistent connection of three exchanges, with the sizes and times the tests
    /// expect:
    /// 0. a 300-byte request at 10 ms; at 30 ms a 2920-byte header in two full segments,
    ///    acknowledged at 32 ms; at 62 ms (an idle, acknowledged gap of 31.9 ms) 3420 bytes
    ///    of results ending at 62.2 ms;
    /// 1. a 1500-byte request at 100 and 100.5 ms; 3920 response bytes at 120–120.2 ms, all
    ///    full segments but the last, so the walk finds no split; the second segment is
    ///    lost and sent again at 400 ms;
    /// 2. a 100-byte request at 500 ms; at 505 ms a 300-byte header, short of the MSS, then
    ///    2260 bytes of results from 505.3 to 505.4 ms; FIN both ways.
    pub(crate) fn persistent() -> Conn {
        use flags::{ACK, FIN};
        let (up, down) = (UP, DOWN);
        let (c, s) = (CI + 1, SI + 1);
        opened(
            &[
                // Exchange 0.
                (10 * MS, up, ACK, c, s, 300),
                (30 * MS, down, ACK, s, c + 300, 1460),
                (30 * MS + 100 * US, down, ACK, s + 1460, c + 300, 1460),
                (32 * MS, up, ACK, c + 300, s + 2920, 0),
                (62 * MS, down, ACK, s + 2920, c + 300, 1460),
                (62 * MS + 100 * US, down, ACK, s + 4380, c + 300, 1460),
                (62 * MS + 200 * US, down, ACK, s + 5840, c + 300, 500),
                (64 * MS, up, ACK, c + 300, s + 6340, 0),
                // Exchange 1.
                (100 * MS, up, ACK, c + 300, s + 6340, 1460),
                (100 * MS + 500 * US, up, ACK, c + 1760, s + 6340, 40),
                (120 * MS, down, ACK, s + 6340, c + 1800, 1460),
                (120 * MS + 100 * US, down, ACK, s + 7800, c + 1800, 1460),
                (120 * MS + 200 * US, down, ACK, s + 9260, c + 1800, 1000),
                (121 * MS, up, ACK, c + 1800, s + 7800, 0),
                (121 * MS + 100 * US, up, ACK, c + 1800, s + 7800, 0),
                (400 * MS, down, ACK, s + 7800, c + 1800, 1460),
                (401 * MS, up, ACK, c + 1800, s + 10260, 0),
                // Exchange 2.
                (500 * MS, up, ACK, c + 1800, s + 10260, 100),
                (505 * MS, down, ACK, s + 10260, c + 1900, 300),
                (505 * MS + 300 * US, down, ACK, s + 10560, c + 1900, 1460),
                (505 * MS + 400 * US, down, ACK, s + 12020, c + 1900, 800),
                (506 * MS, up, ACK, c + 1900, s + 12820, 0),
                (510 * MS, down, ACK | FIN, s + 12820, c + 1900, 0),
                (511 * MS, up, ACK | FIN, c + 1900, s + 12821, 0),
                (512 * MS, down, ACK, s + 12821, c + 1901, 0),
            ],
        )
    }

    /// An upload seen at its receiver: a hole in the client's stream refilled by a segment
    /// with a later timestamp is a loss before the capture point, one refilled by an earlier
    /// timestamp a reordering; same-TSval neighbours after a full segment are capacity pairs,
    /// and one-way delays come from the timestamps.
    #[test]
    fn upstream_losses_reordering_and_pairs_from_client_timestamps() {
        use flags::{ACK, SYN};
        // MSS 1460 and timestamps on both SYNs; `ts(v)` a data segment's option.
        const SYN_OPTS: [u8; 16] = [2, 4, 5, 180, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0];
        fn ts(v: u32) -> [u8; 12] {
            let b = v.to_be_bytes();
            [1, 1, 8, 10, b[0], b[1], b[2], b[3], 0, 0, 0, 1]
        }
        let mut c = conn();
        let (ci, si) = (100u32, 5000u32);
        let mut h = seg(SYN, ci, 0, 65535, 0);
        h.raw_options = &SYN_OPTS;
        c.on_segment(UP, 0, &h, &[], 56);
        let mut h = seg(SYN | ACK, si, ci + 1, 65535, 0);
        h.raw_options = &SYN_OPTS;
        c.on_segment(DOWN, MS, &h, &[], 56);
        c.on_segment(UP, 41 * MS, &seg(ACK, ci + 1, si + 1, 65535, 0), &[], 52);
        let data = |c: &mut Conn, t: u64, k: u32, tsval: u32| {
            let o = ts(tsval);
            let mut h = seg(ACK, ci + 1 + k * 1448, si + 1, 65535, 1448);
            h.raw_options = &o;
            c.on_segment(UP, t, &h, &[], 1500);
        };
        // Segments 0-3 sent together (one tick), arriving 1.2 ms apart (10 Mbit/s).
        for k in 0..4 {
            data(&mut c, 50 * MS + k as u64 * 1_200_000, k, 7);
        }
        // 5 is lost; 6 arrives, then 5 again 40 ms later with a later timestamp.
        data(&mut c, 60 * MS, 6, 17);
        data(&mut c, 100 * MS, 5, 57);
        // 8 overtakes 7 (sent in the same tick): a reordering, not a loss.
        data(&mut c, 110 * MS, 8, 67);
        data(&mut c, 110 * MS + 1_200_000, 7, 67);
        data(&mut c, 111 * MS, 4, 67); // 4 was never seen either: a reordered original
        let e = c.up.cap.estimate().unwrap();
        assert_eq!((e.pairs, e.bursts), (3, 1));
        assert!((e.rate_bps / 10e6 - 1.0).abs() < 1e-9, "{e:?}");
        assert_eq!(c.up.rounds.losses(), 1);
        let r = crate::record::ConnRecord::from_conn(&c);
        assert_eq!((r.lost_packets_c2s, r.capacity_c2s_pairs), (1, 3));
        // The one-way delays: 0 (segment 0) to 3.6 ms (segment 3, behind three others).
        assert!((r.queue_delay_c2s_ms.unwrap() - 3.6).abs() < 0.01, "{r:?}");
    }

    /// Ten 1500-byte segments at once into a 40 kbit/s bottleneck: Monkey's rule gives it 5
    /// packets of queue, so one in service and five waiting fit and the last four overflow.
    /// Retransmissions of those four are explained, a fifth (of a segment that fit) is not;
    /// at 10 Mbit/s (40 packets) nothing overflows.
    #[test]
    fn a_modelled_queue_explains_the_losses_of_a_burst_that_overflows_it() {
        let mut c = conn();
        for i in 0..10u64 {
            c.down.sends.push(i * 1000, 1500, i * 1460);
        }
        c.down.retransmitted = vec![6 * 1460, 7 * 1460, 8 * 1460, 9 * 1460, 2 * 1460];
        assert_eq!(c.queue_explained_losses(40_000.0), 4);
        assert_eq!(c.queue_explained_losses(10_000_000.0), 0);
        // Spread out by more than a packet time (300 ms at 40 kbit/s), nothing queues.
        c.down.sends = SendLog::default();
        for i in 0..10u64 {
            c.down.sends.push(i * 400_000_000, 1500, i * 1460);
        }
        assert_eq!(c.queue_explained_losses(40_000.0), 0);
    }

    /// Stream starts read back whole across 4 GB boundaries, forwards and back.
    #[test]
    fn the_send_log_keeps_whole_stream_positions() {
        let starts = [crate::seq::ORIGIN, crate::seq::ORIGIN + 5, 3 << 32 | 7, 3 << 32 | 9, 1 << 32 | 1, u64::MAX - 3];
        let mut log = SendLog::default();
        for (i, &s) in starts.iter().enumerate() {
            log.push(i as u64, 40 + i as u32, s);
        }
        let expected: Vec<_> = starts.iter().enumerate().map(|(i, &s)| (i as u64, 40 + i as u32, s)).collect();
        assert_eq!(log.iter().collect::<Vec<_>>(), expected);
        assert_eq!((log.len(), log.high.len()), (6, 4));
    }

    /// Every exchange gets its sizes, times and own walk; the retransmitted segment counts
    /// once; the per-direction totals are the exchanges' sums.
    #[test]
    fn every_exchange_has_its_sizes_delays_and_split() {
        let c = persistent();
        let x = &c.exchanges;
        assert_eq!(x.len(), 3);
        let sizes: Vec<_> = x.iter().map(|x| (x.request_bytes, x.response_bytes, x.header_bytes)).collect();
        assert_eq!(sizes, [(300, 6340, Some(2920)), (1500, 3920, None), (100, 2560, Some(300))]);
        let times: Vec<_> = x.iter().map(|x| (x.request_start_ns, x.request_end_ns, x.response_start_ns, x.response_end_ns)).collect();
        assert_eq!(
            times,
            [
                (10 * MS, 10 * MS, Some(30 * MS), Some(62 * MS + 200 * US)),
                (100 * MS, 100 * MS + 500 * US, Some(120 * MS), Some(120 * MS + 200 * US)),
                (500 * MS, 500 * MS, Some(505 * MS), Some(505 * MS + 400 * US)),
            ]
        );
        // Header acknowledged, then idle 31.9 ms: results start 32 ms after the response;
        // no split in exchange 1; a short header in exchange 2.
        assert_eq!(x.iter().map(|x| x.query_delay_ns).collect::<Vec<_>>(), [Some(32 * MS), None, Some(300 * US)]);
        assert_eq!((c.half[UP].unique_bytes, c.half[DOWN].unique_bytes), (1900, 12820));
        assert_eq!((c.half[DOWN].retrans_packets, c.half[DOWN].payload_bytes), (1, 12820 + 1460));
        // The client had each response when its ACK of the last byte came: at 64 ms; at
        // 401 ms, after the retransmission filled the hole (the ACKs at 121 ms stop short);
        // at 506 ms.
        assert_eq!(x.iter().map(|x| x.response_acked_ns).collect::<Vec<_>>(), [Some(64 * MS), Some(401 * MS), Some(506 * MS)]);
    }

    /// A slow start from an initial window of one segment: each round's segments leave as
    /// the ACK of the last round arrives, 50 ms after the previous segment. ACK-clocked, not
    /// a query: no split.
    #[test]
    fn an_ack_clocked_slow_start_is_no_split() {
        use flags::{ACK, FIN};
        let (c, s) = (CI + 1, SI + 1);
        let k = opened(
            &[
                (10 * MS, UP, ACK, c, s, 300),
                (30 * MS, DOWN, ACK, s, c + 300, 1460),
                (80 * MS, UP, ACK, c + 300, s + 1460, 0),
                (80 * MS + 100 * US, DOWN, ACK, s + 1460, c + 300, 1460),
                (80 * MS + 200 * US, DOWN, ACK, s + 2920, c + 300, 1460),
                (130 * MS, UP, ACK, c + 300, s + 4380, 0),
                (130 * MS + 100 * US, DOWN, ACK, s + 4380, c + 300, 500),
                (180 * MS, UP, ACK, c + 300, s + 4880, 0),
                (181 * MS, DOWN, ACK | FIN, s + 4880, c + 300, 0),
                (182 * MS, UP, ACK | FIN, c + 300, s + 4881, 0),
            ],
        );
        let x = &k.exchanges[0];
        assert_eq!((x.response_bytes, x.header_bytes, x.query_delay_ns), (4880, None, None));
    }

    /// An idle gap the client has not acknowledged the data before is no split (Monkey's
    /// walk): the server was held back by its window, not by the query.
    #[test]
    fn an_unacknowledged_gap_is_no_split() {
        use flags::ACK;
        let (c, s) = (CI + 1, SI + 1);
        let k = opened(
            &[
                (3 * MS, UP, ACK, c, s, 200),
                (5 * MS, DOWN, ACK, s, c + 200, 1460),
                (40 * MS, DOWN, ACK, s + 1460, c + 200, 1460),
                (40 * MS + 100 * US, DOWN, ACK, s + 2920, c + 200, 700),
            ],
        );
        let x = &k.exchanges[0];
        assert_eq!((x.request_bytes, x.response_bytes, x.header_bytes, x.query_delay_ns), (200, 3620, None, None));
    }

    /// A receiver closes its window; the sender probes it three times with the next byte,
    /// then sends that byte again with more once the window opens (tcptrace's zwnd.dmp).
    #[test]
    fn zero_window_probes_are_neither_retransmissions_nor_unique() {
        use flags::{ACK, SYN};
        let mut c = conn();
        let (ci, si) = (100u32, 5000u32);
        c.on_segment(UP, 0, &seg(SYN, ci, 0, 65535, 0), &[], 40);
        c.on_segment(DOWN, MS, &seg(SYN | ACK, si, ci + 1, 65535, 0), &[], 40);
        c.on_segment(UP, 2 * MS, &seg(ACK, ci + 1, si + 1, 65535, 0), &[], 40);
        c.on_segment(DOWN, 3 * MS, &seg(ACK, si + 1, ci + 1, 65535, 1000), &[], 1040);
        c.on_segment(UP, 4 * MS, &seg(ACK, ci + 1, si + 1001, 0, 0), &[], 40);
        for k in 0..3 {
            c.on_segment(DOWN, (5 + 2 * k) * MS, &seg(ACK, si + 1001, ci + 1, 65535, 1), &[], 41);
            c.on_segment(UP, (6 + 2 * k) * MS, &seg(ACK, ci + 1, si + 1001, 0, 0), &[], 40);
        }
        c.on_segment(UP, 20 * MS, &seg(ACK, ci + 1, si + 1001, 65535, 0), &[], 40);
        c.on_segment(DOWN, 21 * MS, &seg(ACK, si + 1001, ci + 1, 65535, 1000), &[], 1040);
        let d = &c.half[DOWN];
        assert_eq!((d.zero_window_probes, d.retrans_packets, d.payload_bytes, d.unique_bytes), (3, 0, 2003, 2000));
    }

    /// The server's FIN overtakes the last data, which then comes again with the FIN: the
    /// second segment retransmits the FIN's sequence number but no data (tcptrace counts
    /// it a retransmission of one byte, and its 418 data bytes unique).
    #[test]
    fn fin_repeated_behind_new_data() {
        use flags::{ACK, FIN, SYN};
        let mut c = conn();
        let (ci, si) = (100u32, 5000u32);
        c.on_segment(UP, 0, &seg(SYN, ci, 0, 65535, 0), &[], 40);
        c.on_segment(DOWN, MS, &seg(SYN | ACK, si, ci + 1, 65535, 0), &[], 40);
        c.on_segment(UP, 2 * MS, &seg(ACK, ci + 1, si + 1, 65535, 0), &[], 40);
        c.on_segment(DOWN, 3 * MS, &seg(ACK | FIN, si + 419, ci + 1, 65535, 0), &[], 40);
        c.on_segment(DOWN, 9 * MS, &seg(ACK | FIN, si + 1, ci + 1, 65535, 418), &[], 458);
        let d = &c.half[DOWN];
        assert_eq!((d.unique_bytes, d.retrans_packets, d.retrans_bytes), (418, 1, 1));
    }

    /// A refused connection's SYN RTT is the time to the RST-ACK answering it; a RST that
    /// acknowledges something else is no answer.
    #[test]
    fn refused_connection_gives_a_syn_rtt() {
        use flags::{ACK, RST, SYN};
        let mut c = conn();
        c.on_segment(UP, 10 * MS, &seg(SYN, 700, 0, 8760, 0), &[], 44);
        c.on_segment(DOWN, 15 * MS, &seg(RST | ACK, 0, 701, 0, 0), &[], 40);
        assert_eq!((c.syn_rtt_ns, c.handshake_rtt_ns), (Some(5 * MS), None));
        let mut c = conn();
        c.on_segment(UP, 10 * MS, &seg(SYN, 700, 0, 8760, 0), &[], 44);
        c.on_segment(DOWN, 15 * MS, &seg(RST | ACK, 0, 9999, 0, 0), &[], 40);
        assert_eq!(c.syn_rtt_ns, None);
    }

    #[test]
    fn http_lines() {
        assert_eq!(http_method(b"GET /x HTTP/1.1\r\n"), Some("GET"));
        assert_eq!(http_method(b"GETX /"), None);
        assert_eq!(http_status(b"HTTP/1.1 404 Not Found\r\n"), Some(404));
        assert_eq!(http_status(b"HTTP/1.1 4x4 "), None);
        assert_eq!(http_status(b"HTTP/1."), None);
    }
}
