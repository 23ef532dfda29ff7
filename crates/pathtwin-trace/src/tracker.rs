//! Connection tracking: which connection each TCP segment belongs to, and when a
//! connection is finished.
//!
//! Owns the flow table (4-tuple to live connection), role assignment (client, server), port
//! reuse (a new SYN on a closed 4-tuple starts a new connection) and eviction: a connection
//! that has closed and stayed quiet for [`AnalyzeOptions::linger_ns`] of capture time is
//! turned into its [`ConnRecord`] (and, if asked for, its [`ExchangeRecord`]s) and
//! forgotten, so memory follows the number of concurrent connections, not the length of the
//! capture. It also counts what could not be decoded.
//!
//! A tracker may own one *shard* of the flows (by a hash of the 4-tuple): several trackers
//! fed the same frames on several threads then split the work, and [`merge`] joins their
//! rows and counts into exactly what one tracker would have produced. For that, nothing a
//! tracker decides depends on which packets it owns: connections are named by the number
//! of the frame that opened them, and closed connections are swept at fixed frame counts.

use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;

use rustc_hash::FxHashMap;

use crate::conn::{Conn, Termination, DOWN, UP};
use crate::decode::{self, flags, LinkType, Packet, Skip, TcpHeader, Transport};
use crate::record::{ConnRecord, CrossTrafficRecord, ExchangeRecord};

/// What `analyze` should assume and keep.
#[derive(Debug, Clone)]
pub struct AnalyzeOptions {
    /// The server's address and optionally port: sets the roles and ignores connections
    /// not involving it. Without it the SYN's receiver is the server.
    pub server: Option<(IpAddr, Option<u16>)>,
    /// Capture time a closed connection stays in the table to absorb late retransmissions.
    pub linger_ns: u64,
    /// Threads for a capture in memory (a mapped file); 0 chooses from the processor count
    /// and the capture's size. The output does not depend on it.
    pub threads: usize,
    /// Also keep one [`ExchangeRecord`] per request/response exchange (the replay's
    /// workload); off, their rows cost no memory.
    pub exchanges: bool,
    /// Also keep each connection direction's cross traffic over time
    /// ([`CrossTrafficRecord`]).
    pub cross_traffic: bool,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions { server: None, linger_ns: 60_000_000_000, threads: 0, exchanges: false, cross_traffic: false }
    }
}

/// The rows of finished connections and the capture counts, of one tracker or merged.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    pub conns: Vec<ConnRecord>,
    /// Empty unless [`AnalyzeOptions::exchanges`].
    pub exchanges: Vec<ExchangeRecord>,
    /// Empty unless [`AnalyzeOptions::cross_traffic`].
    pub cross_traffic: Vec<CrossTrafficRecord>,
    pub stats: CaptureStats,
}

impl Rows {
    /// Turns a finished connection into its rows.
    fn retire(&mut self, c: &Conn, opts: &AnalyzeOptions) {
        self.conns.push(ConnRecord::from_conn(c));
        if opts.exchanges {
            self.exchanges.extend(ExchangeRecord::from_conn(c));
        }
        if opts.cross_traffic {
            self.cross_traffic.extend(CrossTrafficRecord::from_conn(c));
        }
    }
}

/// Counts over the whole capture; per-packet problems are warnings here, never errors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureStats {
    pub frames: u64,
    pub tcp_packets: u64,
    /// IP packets of other protocols, and TCP not involving `--server`.
    pub other_packets: u64,
    /// Frames that are not IP (ARP and the like).
    pub non_ip: u64,
    /// Warnings: frames whose link, IP or TCP header is cut short or invalid.
    pub bad_headers: u64,
    /// Non-first IP fragments (no TCP header to read).
    pub fragments: u64,
    /// TCP segments whose payload the snap length cut (headers still used).
    pub snapped: u64,
    /// Warning: the file ended inside a record.
    pub truncated_tail: bool,
    pub connections: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

type Endpoint = (IpAddr, u16);

/// A flow's endpoints in canonical order (the smaller address and port first), so that both
/// directions find the same entry. Addresses are held as 128-bit numbers, IPv4 in the low 32
/// bits, with the family kept apart so that an IPv4 flow never meets an IPv6 one: a
/// fixed-size key that compares as five words instead of two enums and two ports.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FlowKey {
    lo: u128,
    hi: u128,
    /// `lo`'s port in the high half, `hi`'s in the low half.
    ports: u32,
    v6: bool,
}

impl FlowKey {
    /// The key of a packet from `src` to `dst`, and whether `src` is the key's `lo` side.
    /// Addresses are taken by reference and read by family: copying a whole `IpAddr` of a
    /// just-decoded packet reads bytes that were never written together, and the processor
    /// stalls on such loads.
    #[inline]
    fn of((src_ip, src_port): (&IpAddr, u16), (dst_ip, dst_port): (&IpAddr, u16)) -> (FlowKey, bool) {
        let num = |ip: &IpAddr| match ip {
            IpAddr::V4(a) => u32::from(*a) as u128,
            IpAddr::V6(a) => u128::from(*a),
        };
        let (s, d) = ((num(src_ip), src_port), (num(dst_ip), dst_port));
        let src_lo = s <= d;
        let (lo, hi) = if src_lo { (s, d) } else { (d, s) };
        let key = FlowKey { lo: lo.0, hi: hi.0, ports: (lo.1 as u32) << 16 | hi.1 as u32, v6: src_ip.is_ipv6() };
        (key, src_lo)
    }
}

impl Hash for FlowKey {
    /// Two words for an IPv4 flow (its addresses side by side, then ports and family), so
    /// the per-packet hash is two multiplications; IPv6 folds its upper bits into the same
    /// two words. Equality stays exact, so folding costs at most a rare collision.
    fn hash<H: Hasher>(&self, h: &mut H) {
        let (lo, hi) = (self.lo, self.hi);
        h.write_u64(lo as u64 ^ (hi as u64).rotate_left(32));
        h.write_u64(((lo >> 64) as u64 ^ ((hi >> 64) as u64).rotate_left(32)) ^ ((self.ports as u64) << 1 | self.v6 as u64));
    }
}

/// A flow-table entry: which side of the key is the client sits beside the pointer, so the
/// direction of a packet is known without touching the connection.
struct Slot {
    client_is_lo: bool,
    conn: Box<Conn>,
}

/// Sweep closed connections every this many frames.
const SWEEP_EVERY: u64 = 1 << 16;

/// Creates a connection for a packet that matched none, deciding who is the client.
fn new_conn(index: u64, opts: &AnalyzeOptions, src: Endpoint, dst: Endpoint, tcp: &TcpHeader<'_>, now: u64) -> Conn {
    let syn = tcp.has(flags::SYN);
    let ack = tcp.has(flags::ACK);
    let (client, server, known) = if syn && !ack {
        (src, dst, true)
    } else if syn && ack {
        (dst, src, true)
    } else if let Some(s) = opts.server {
        if src.0 == s.0 && s.1.map_or(true, |p| p == src.1) {
            (dst, src, true)
        } else {
            (src, dst, true)
        }
    } else if src.1 < dst.1 {
        // Mid-stream: the lower port is usually the service's.
        (dst, src, false)
    } else {
        (src, dst, false)
    };
    Conn::new(index, client, server, known, now)
}

/// Streams packets into connections; call [`Tracker::finish`] at the end of the capture.
pub struct Tracker {
    opts: AnalyzeOptions,
    /// FxHash (rustc's hasher): the table is hit once per packet and its keys are not
    /// attacker-chosen in an offline analysis, so SipHash's DoS resistance buys nothing.
    /// Connections are boxed so that the buckets stay small: probing then touches one cache
    /// line per candidate instead of a whole connection.
    table: FxHashMap<FlowKey, Slot>,
    /// Rows of the connections already finished; their `stats` stay unused until `finish`.
    done: Rows,
    /// This tracker's shard and the number of shards.
    shard: u64,
    shards: u64,
    /// [`Tracker::pass_over`] found the current frame's flow to be this shard's.
    peeked_owned: bool,
    pub stats: CaptureStats,
}

impl Tracker {
    /// A tracker of every flow.
    pub fn new(opts: AnalyzeOptions) -> Self {
        Tracker::shard(opts, 0, 1)
    }

    /// A tracker of the flows of shard `shard` out of `shards`; it must be fed every frame.
    /// Shard 0 also counts the frames that belong to no flow.
    pub fn shard(opts: AnalyzeOptions, shard: usize, shards: usize) -> Self {
        assert!(shard < shards, "shard {shard} of {shards}");
        let (shard, shards) = (shard as u64, shards as u64);
        Tracker { opts, table: FxHashMap::default(), done: Rows::default(), shard, shards, peeked_owned: false, stats: CaptureStats::default() }
    }

    /// Connections currently in the table.
    pub fn live(&self) -> usize {
        self.table.len()
    }

    /// Whether this tracker's shard owns the flow `key`.
    #[inline]
    fn owns(&self, key: FlowKey) -> bool {
        // Bits apart from those that place the key in the table (the lowest) and tag it (the
        // top seven), so that one shard's keys still spread over all of its buckets.
        // Bits 24..56 mapped onto 0..shards by a multiplication (Lemire's fast range): no
        // division on this per-packet path.
        let bits = (rustc_hash::FxBuildHasher.hash_one(key) >> 24) as u32 as u64;
        self.shards == 1 || (bits * self.shards) >> 32 == self.shard
    }

    /// Passes over a frame of another shard's flow, found without decoding it (see
    /// [`decode::peek_ipv4_tcp`]); returns `false`, having done nothing, when the frame must
    /// be decoded and fed to [`Tracker::on_packet`] or [`Tracker::on_skip`].
    #[inline]
    pub fn pass_over(&mut self, ts_ns: u64, link: LinkType, frame: &[u8]) -> bool {
        if self.shards == 1 {
            return false;
        }
        let Some((s, d, sp, dp)) = decode::peek_ipv4_tcp(link, frame) else { return false };
        if self.owns(FlowKey::of((&IpAddr::from(s), sp), (&IpAddr::from(d), dp)).0) {
            // Ours: spare the coming `on_packet` the same question.
            self.peeked_owned = true;
            return false;
        }
        self.on_time(ts_ns);
        true
    }

    /// Records a frame that could not be decoded.
    pub fn on_skip(&mut self, ts_ns: u64, skip: Skip) {
        self.on_time(ts_ns);
        if self.shard != 0 {
            return;
        }
        match skip {
            Skip::NotIp => self.stats.non_ip += 1,
            Skip::BadHeader => self.stats.bad_headers += 1,
            Skip::Fragment => self.stats.fragments += 1,
        }
    }

    #[inline]
    fn on_time(&mut self, ts_ns: u64) {
        self.stats.frames += 1;
        if self.stats.first_ns == 0 || ts_ns < self.stats.first_ns {
            self.stats.first_ns = ts_ns;
        }
        self.stats.last_ns = self.stats.last_ns.max(ts_ns);
        if self.stats.frames % SWEEP_EVERY == 0 {
            self.sweep(ts_ns);
        }
    }

    /// Feeds one decoded packet captured at `ts_ns`.
    pub fn on_packet(&mut self, ts_ns: u64, pkt: &Packet<'_>) {
        self.on_time(ts_ns);
        let Transport::Tcp(ref tcp, payload) = pkt.transport else {
            if self.shard == 0 {
                self.stats.other_packets += 1;
            }
            return;
        };
        let (key, src_lo) = FlowKey::of((&pkt.src, tcp.src_port), (&pkt.dst, tcp.dst_port));
        if !std::mem::take(&mut self.peeked_owned) && !self.owns(key) {
            return;
        }
        let src = || (pkt.src, tcp.src_port);
        let dst = || (pkt.dst, tcp.dst_port);
        if let Some(server) = self.opts.server {
            let is = |e: Endpoint| e.0 == server.0 && server.1.map_or(true, |p| p == e.1);
            if !is(src()) && !is(dst()) {
                self.stats.other_packets += 1;
                return;
            }
        }
        self.stats.tcp_packets += 1;
        if (payload.len() as u32) < tcp.payload_len {
            self.stats.snapped += 1;
        }
        let is_syn = tcp.has(flags::SYN) && !tcp.has(flags::ACK);
        if is_syn {
            if let Some(old) = self.table.get(&key) {
                if old.conn.is_reused_by(tcp.seq) {
                    let old = self.table.remove(&key).expect("entry just seen");
                    self.done.retire(&old.conn, &self.opts);
                }
            }
        }
        // One hash lookup per packet: this is the hot path of the whole analysis. By
        // reference, not through the entry API: moving the key into an entry copies it
        // through memory on every packet, for an insertion that happens once per connection.
        let slot = match self.table.get_mut(&key) {
            Some(slot) => slot,
            None => {
                // Named by its first frame: the same name whichever shard owns it.
                let index = self.stats.frames;
                self.stats.connections += 1;
                let conn = Box::new(new_conn(index, &self.opts, src(), dst(), tcp, ts_ns));
                self.table.entry(key).or_insert(Slot { client_is_lo: (conn.client == src()) == src_lo, conn })
            }
        };
        let dir = if src_lo == slot.client_is_lo { UP } else { DOWN };
        slot.conn.on_segment(dir, ts_ns, tcp, payload, pkt.ip_len);
    }

    /// Finalizes closed connections quiet for longer than the linger time.
    fn sweep(&mut self, now: u64) {
        let linger = self.opts.linger_ns;
        let (done, opts) = (&mut self.done, &self.opts);
        self.table.retain(|_, Slot { conn: c, .. }| {
            let closed = c.termination() != Termination::Incomplete;
            if closed && c.last_ns.saturating_add(linger) < now {
                done.retire(c, opts);
                false
            } else {
                true
            }
        });
    }

    /// Ends the capture: every remaining connection becomes a row. Rows are named by first
    /// frame until [`merge`] numbers them.
    pub fn finish(mut self) -> Rows {
        // A row is several hundred bytes: grown one doubling at a time, the rows of a few
        // thousand live connections were copied over and over.
        self.done.conns.reserve(self.table.len());
        for (_, slot) in self.table.drain() {
            self.done.retire(&slot.conn, &self.opts);
        }
        Rows { stats: self.stats, ..self.done }
    }
}

/// Joins the finished shards of one capture (shard 0 first; one part for an unsharded
/// tracker): connection rows ordered by first packet and numbered from 0, exchange rows
/// ordered by (connection, exchange) under the same numbers, counts added up.
pub fn merge(parts: Vec<Rows>) -> Rows {
    let mut rows = Vec::with_capacity(parts.iter().map(|p| p.conns.len()).sum());
    let mut exchanges = Vec::with_capacity(parts.iter().map(|p| p.exchanges.len()).sum());
    let mut cross_traffic = Vec::with_capacity(parts.iter().map(|p| p.cross_traffic.len()).sum());
    let mut stats = CaptureStats::default();
    for (i, Rows { conns: r, exchanges: x, cross_traffic: ct, stats: s }) in parts.into_iter().enumerate() {
        rows.extend(r);
        exchanges.extend(x);
        cross_traffic.extend(ct);
        if i == 0 {
            // Every shard saw every frame; shard 0 alone counted those of no flow.
            (stats.frames, stats.first_ns, stats.last_ns) = (s.frames, s.first_ns, s.last_ns);
            (stats.non_ip, stats.bad_headers, stats.fragments) = (s.non_ip, s.bad_headers, s.fragments);
            stats.truncated_tail = s.truncated_tail;
        }
        stats.tcp_packets += s.tcp_packets;
        stats.other_packets += s.other_packets;
        stats.snapped += s.snapped;
        stats.connections += s.connections;
    }
    // Names (first frame numbers) are unique, so both orders are total: the same whichever
    // shard finished which connection, and whenever. A connection's profile rows are made
    // in order (server to client first, then by time): a stable sort keeps it.
    rows.sort_unstable_by_key(|r| r.conn_id);
    exchanges.sort_unstable_by_key(|x: &ExchangeRecord| (x.conn_id, x.exchange));
    cross_traffic.sort_by_key(|x: &CrossTrafficRecord| x.conn_id);
    renumber(&rows, exchanges.iter_mut().map(|x| &mut x.conn_id));
    renumber(&rows, cross_traffic.iter_mut().map(|x| &mut x.conn_id));
    for (i, r) in rows.iter_mut().enumerate() {
        r.conn_id = i as u64;
    }
    Rows { conns: rows, exchanges, cross_traffic, stats }
}

/// Gives rows that follow their connections (named by first frame, in order) the
/// connections' numbers, in one walk.
fn renumber<'a>(conns: &[ConnRecord], ids: impl Iterator<Item = &'a mut u64>) {
    let mut at = 0;
    for id in ids {
        while at + 1 < conns.len() && conns[at].conn_id < *id {
            at += 1;
        }
        *id = at as u64;
    }
}
