//! Per-direction path estimates beyond Monkey See's bottleneck, loss and min RTT: what
//! `pathtwin trace to-paths` needs to fill a paths model (NSDI'09: capacity and available
//! bandwidth kept apart, a queue and a loss rate in each direction), each estimate with what
//! makes it a point estimate, a bound or nothing.
//!
//! Owns two streaming estimators that a connection keeps for each direction, and the rules
//! that turn them into a [`DirectionEstimate`] when the connection ends. Feeding them from
//! packets is `conn`'s job; naming the columns is `record`'s. Server to client the capture
//! sits at the sender (Monkey's vantage point), client to server at the receiver.
//!
//! - [`PairPool`], **capacity** from back-to-back pairs. Server to client: consecutive ACKs
//!   whose segments left the server in one burst (Monkey's ACK pairs under its *same burst*
//!   rule only); client to server: consecutive client segments with the same TCP timestamp
//!   (sent within one tick of the client's clock: one burst), the first of them full-sized
//!   (a short one ends an application write, and the next may wait). Segments that reach the
//!   bottleneck together leave it one transmission time apart. Only pairs before the
//!   direction's first loss count: once a queue has overflowed, back-to-back segments no
//!   longer sit together in it (cross traffic that found it full goes first; the emulator's
//!   placeholders wait at its entrance for that), and their spacing measures a share, not
//!   the capacity. [Deviation from Monkey's mode of single pairs] Jitter after the
//!   bottleneck (an ACK waiting behind reverse cross traffic; the emulator's CBR
//!   placeholders quantise ACK times to their period) moves each ACK by a residual, so a
//!   burst's span is its bits / C plus one residual difference however long the burst is
//!   (the differences telescope). The estimate is therefore least squares through the
//!   origin over bursts, 1/C = Σ b·s / Σ b² (bits b, span s), which weighs a burst by its
//!   length squared: the first window's ten segments count for more than ten two-segment
//!   bursts, whose single gaps the jitter can halve or double. Its standard error is that
//!   regression's, and the pairs' RMS deviation from b / C measures the jitter. Jitter that
//!   locks to the flow (periodic cross traffic on the reverse path, the emulator's
//!   placeholders) shifts every burst alike, which no scatter shows: [`PairEstimate`]'s
//!   `bias_bps` bounds that, from the spread of the pairs' gaps. Long bursts are the least
//!   exposed, so the estimate uses bursts of at least one, two or four pairs, whichever
//!   gives the smallest 3·SE + bias.
//! - [`Rounds`], **available bandwidth, queue, loss and what limited the transfer**:
//!   deliveries (bytes the client acknowledged; client bytes that arrived) in rounds of one
//!   min RTT, each round with the smallest and largest queueing-delay sample in it (server to
//!   client: clean RTT samples, from ACKs covering no retransmitted segment and not a lone
//!   segment a delayed-ACK receiver may have held; client to server: one-way delay from the
//!   client's TCP timestamps, 1-ms ticks as Linux, FreeBSD and macOS send them) and what the
//!   sender did in it: retransmitted, filled the receiver's window, or let its application
//!   set the pace (a segment short of full with more data after it: the send buffer ran dry;
//!   or data after a round trip idle with everything acknowledged). The round under way is
//!   kept whole; finished ones in 32 bytes (delays to the microsecond), [`ROUND_LOG`] of
//!   them at most, neighbours merging when full.
//!
//! **ABW**, which NSDI'09 §3.3 equates with a TCP flow's throughput. A round is *busy* when
//! every delay sample in it shows a standing queue: above the base delay by more than the
//! sample's own burst and a packet in service, plus one more packet and the noise (twice the
//! ACK jitter; the timestamp tick) — [`RoundInputs`]. While the bottleneck's queue does not
//! empty the link sends at C, and what the foreground did not get went to cross traffic
//! (iBox's argument, ALGORITHMS.md §9): over a run of busy rounds lasting T, the
//! foreground's delivery rate is the ABW up to the change of cross-traffic backlog in the
//! queue, which is at most what the queue held at the run's start or end: |rate − ABW| ≤
//! q·C / T. Pooled over runs, ABW = Σbits / ΣT ± Σ(q·C) / ΣT, a point estimate when that
//! bound is within [`POINT_BOUND`] of it \[P\]. This is what "network-limited" means here: the
//! sender offered more than the path gave for whole round trips, whatever else held its
//! window (a receiver window above the path's BDP still leaves a standing queue). A transfer
//! that never kept the queue standing (too short to leave slow start, held by the receiver's
//! window or by the application) bounds ABW from below only, by what it got over its whole
//! length less the same backlog term. **Queue**: the largest queueing delay × C.
//! **Loss**: losses whose latest delay sample shows the queue at least half as full as it
//! ever was are congestion losses, which a model's queue makes by itself; the rest are
//! random loss. Server to client a loss is a retransmission; client to server a hole in the
//! client's stream filled by a retransmission (a later TSval than the data above it), not by
//! a reordered original. **What limited the transfer** ([`Limit`]): the network when the ABW
//! is a point estimate; else the receiver's window, or the application, when at least half
//! the rounds show it; else losses (no standing queue, or one too brief), or slow start.

/// Largest error bound, as a share of the estimate, for which ABW is a point estimate \[P\].
pub const POINT_BOUND: f64 = 0.25;
/// Rounds a direction keeps; when full, neighbours merge (each then spans two rounds' time)
/// so that a long connection costs the same as a short one.
pub const ROUND_LOG: usize = 64;
/// Round length when no RTT is known yet \[P\].
const DEFAULT_ROUND_NS: u64 = 100_000_000;
/// Losses remembered for the congestion/random split.
const LOSS_LOG: usize = 256;

/// Bits of a round's flags.
pub mod flag {
    /// A retransmission was sent or acknowledged (server to client), or a lost segment
    /// arrived again (client to server): recovery, no steady delivery.
    pub const RETX: u8 = 1;
    /// New data reached the right edge of the receiver's advertised window.
    pub const RWND: u8 = 2;
    /// The sender's application set the pace: more data after a segment short of a full
    /// one (its send buffer had run dry), or data after a round trip idle with everything
    /// acknowledged.
    pub const APP: u8 = 4;
}

/// The capacity estimate of a [`PairPool`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairEstimate {
    pub rate_bps: f64,
    /// Standard error of `rate_bps` (the bursts' scatter about the fit); `None` below two
    /// bursts. It assumes the jitter after the bottleneck is independent of the flow.
    pub se_bps: Option<f64>,
    /// Bound on the bias that jitter locked to the flow could cause (periodic reverse
    /// traffic, as the emulator's placeholders are, can delay every burst's last ACK alike):
    /// each burst's span is off by at most one wait J, taken as the spread of the pairs'
    /// gaps (per bit, × the largest pair), so 1/C by at most β = J·Σb / Σb², and C by at most
    /// C·Cβ / (1 − Cβ) (infinite from Cβ = 1 on).
    pub bias_bps: f64,
    /// Pairs and bursts the estimate used: those of bursts of `min_pairs` pairs or more.
    pub pairs: u64,
    pub bursts: u64,
    pub min_pairs: u64,
    /// Σ b² over the bursts (bits²): the least squares' weight of this estimate, with which
    /// estimates of several connections pool into one (1/C = Σ w/C_i / Σ w).
    pub weight: f64,
    /// RMS deviation of the pairs' gaps from bits / rate, in seconds: the jitter added after
    /// the bottleneck.
    pub jitter_s: f64,
}

/// Additive sums over bursts (bits b, span s) and their pairs.
#[derive(Debug, Clone, Copy, Default)]
struct PairSums {
    bursts: u64,
    pairs: u64,
    // Over bursts: Σb, Σb², Σbs, Σs².
    sb: f64,
    sbb: f64,
    sbs: f64,
    sss: f64,
    // Over pairs: Σb², Σbs, Σs², for the jitter.
    pbb: f64,
    pbs: f64,
    pss: f64,
}

impl PairSums {
    fn add(&mut self, o: &PairSums) {
        self.bursts += o.bursts;
        self.pairs += o.pairs;
        self.sb += o.sb;
        self.sbb += o.sbb;
        self.sbs += o.sbs;
        self.sss += o.sss;
        self.pbb += o.pbb;
        self.pbs += o.pbs;
        self.pss += o.pss;
    }
}

/// Bursts are kept apart by their number of pairs: one, two or three, four or more.
const PAIR_CLASSES: [u64; 3] = [1, 2, 4];

/// Back-to-back pairs pooled into a capacity estimate (module doc). Memory is constant: sums
/// per class of burst length.
#[derive(Debug, Clone, Default)]
pub struct PairPool {
    classes: [PairSums; 3],
    // Extremes of a pair's seconds per bit, and the largest pair's bits: the jitter bound.
    r_min: f64,
    r_max: f64,
    b_max: f64,
    pairs: u64,
    /// The burst under way: its key and sums.
    open: Option<(u64, PairSums)>,
}

impl PairPool {
    /// Adds a pair of `bits` over `gap_s` seconds from burst `burst` (pairs of one burst come
    /// one after another).
    pub fn add(&mut self, burst: u64, bits: f64, gap_s: f64) {
        if self.open.as_ref().is_some_and(|(k, _)| *k != burst) {
            self.close();
        }
        let (_, o) = self.open.get_or_insert((burst, PairSums::default()));
        o.pairs += 1;
        o.sb += bits;
        o.sbs += gap_s; // the span, until the burst closes
        o.pbb += bits * bits;
        o.pbs += bits * gap_s;
        o.pss += gap_s * gap_s;
        if bits > 0.0 {
            let r = gap_s / bits;
            (self.r_min, self.r_max) = if self.pairs == 0 { (r, r) } else { (self.r_min.min(r), self.r_max.max(r)) };
            self.b_max = self.b_max.max(bits);
        }
        self.pairs += 1;
    }

    fn close(&mut self) {
        if let Some((_, o)) = self.open.take() {
            let (b, span) = (o.sb, o.sbs);
            let class = PAIR_CLASSES.iter().rposition(|&n| o.pairs >= n).unwrap_or(0);
            let burst = PairSums { bursts: 1, sbb: b * b, sbs: b * span, sss: span * span, ..o };
            self.classes[class].add(&burst);
        }
    }

    pub fn pairs(&self) -> u64 {
        self.pairs
    }

    /// The estimate from the bursts of at least one, two or four pairs, whichever is the
    /// surest (smallest 3·SE + bias bound; a single burst's error is within its bias bound),
    /// or `None` without pairs spanning any time.
    pub fn estimate(&self) -> Option<PairEstimate> {
        let mut p = self.clone();
        p.close();
        let mut best: Option<(f64, PairEstimate)> = None;
        for (k, &min_pairs) in PAIR_CLASSES.iter().enumerate() {
            let mut s = PairSums::default();
            for c in &p.classes[k..] {
                s.add(c);
            }
            let Some(e) = p.fit(&s, min_pairs) else { continue };
            let u = (3.0 * e.se_bps.unwrap_or(0.0) + e.bias_bps) / e.rate_bps;
            if best.as_ref().map_or(true, |(b, _)| u < *b) {
                best = Some((u, e));
            }
        }
        best.map(|(_, e)| e)
    }

    /// Least squares over the bursts summed in `s`.
    fn fit(&self, s: &PairSums, min_pairs: u64) -> Option<PairEstimate> {
        if !(s.sbs > 0.0 && s.sbb > 0.0) {
            return None;
        }
        // s_i = b_i·x + e_i with x = 1/C and e_i one residual difference whatever the
        // burst's length: least squares through the origin, x = Σbs / Σb².
        let x = s.sbs / s.sbb;
        let r = 1.0 / x;
        let n = s.bursts as f64;
        let se_bps = (s.bursts >= 2).then(|| {
            let resid = (s.sss - s.sbs * s.sbs / s.sbb).max(0.0);
            let se_x = (resid / (n - 1.0)).sqrt() / s.sbb.sqrt();
            se_x / (x * x)
        });
        let dev = (s.pss - 2.0 * s.pbs / r + s.pbb / (r * r)).max(0.0);
        // The largest wait J, from every pair (the path's jitter, whichever bursts are used):
        // a pair's gap is its transmission time plus a difference of two waits in [0, J], so
        // the gaps spread over at most 2J; once the jitter has both shortened a gap (to
        // nearly nothing: two ACKs released together) and lengthened one, over about J. The
        // whole spread is taken as J, erring wide. [P]
        let wait_s = self.b_max * (self.r_max - self.r_min).max(0.0);
        Some(PairEstimate {
            rate_bps: r,
            se_bps,
            // 1/C may be low by β = J·Σb/Σb²: C high by C·Cβ/(1 − Cβ) (unbounded past 1).
            bias_bps: {
                let cb = r * wait_s * s.sb / s.sbb;
                if cb < 1.0 { r * cb / (1.0 - cb) } else { f64::INFINITY }
            },
            pairs: s.pairs,
            bursts: s.bursts,
            min_pairs,
            weight: s.sbb,
            jitter_s: (dev / s.pairs as f64).sqrt(),
        })
    }
}

/// The round under way, at full precision.
#[derive(Debug, Clone, Copy)]
struct OpenRound {
    start_ns: u64,
    /// The last delivery counted in it (its start while empty).
    end_ns: u64,
    bytes: u64,
    /// Smallest delay sample (ns, on the direction's own scale) and the segments it covered.
    delay_min: i64,
    min_group: u32,
    delay_max: i64,
    samples: u32,
    /// Longest time between deliveries within it (from its start on).
    max_gap_ns: u64,
    flags: u8,
}

impl OpenRound {
    fn new(at: u64, flags: u8) -> OpenRound {
        OpenRound { start_ns: at, end_ns: at, bytes: 0, delay_min: i64::MAX, min_group: 0, delay_max: i64::MIN, samples: 0, max_gap_ns: 0, flags }
    }
}

/// A finished round in 32 bytes (a long connection keeps [`ROUND_LOG`] of them, and every
/// connection of a capture its own): times in microseconds, delays in microseconds from
/// the direction's first sample, counts saturating.
#[derive(Debug, Clone, Copy)]
struct Round {
    start_ns: u64,
    dur_us: u32,
    bytes: u32,
    delay_min_us: i32,
    delay_max_us: i32,
    max_gap_us: u32,
    samples: u16,
    min_group: u8,
    flags: u8,
}

fn us(ns: u64) -> u32 {
    (ns / 1_000).min(u32::MAX as u64) as u32
}

impl Round {
    /// `r` compacted, its delays taken from `origin` (rounded down: the minimum, up: the maximum).
    fn closed(r: &OpenRound, origin: i64) -> Round {
        // In integers: rounding a float quotient called libm's floor and ceil (out of line
        // without SSE4.1) on every closed round, and gives the same microseconds.
        let rel = |d: i64, up: bool| {
            let n = d - origin;
            let us = n.div_euclid(1_000) + i64::from(up && n.rem_euclid(1_000) != 0);
            us.clamp(i32::MIN as i64 + 1, i32::MAX as i64) as i32
        };
        let (delay_min_us, delay_max_us) = if r.samples > 0 { (rel(r.delay_min, false), rel(r.delay_max, true)) } else { (i32::MAX, i32::MIN) };
        Round {
            start_ns: r.start_ns,
            dur_us: us(r.end_ns.saturating_sub(r.start_ns)),
            bytes: r.bytes.min(u32::MAX as u64) as u32,
            delay_min_us,
            delay_max_us,
            max_gap_us: us(r.max_gap_ns),
            samples: r.samples.min(u16::MAX as u32) as u16,
            min_group: r.min_group.min(u8::MAX as u32) as u8,
            flags: r.flags,
        }
    }

    fn merge(a: Round, b: Round) -> Round {
        let (delay_min_us, min_group) = if b.delay_min_us < a.delay_min_us { (b.delay_min_us, b.min_group) } else { (a.delay_min_us, a.min_group) };
        Round {
            start_ns: a.start_ns,
            dur_us: us((b.start_ns + b.dur_us as u64 * 1_000).saturating_sub(a.start_ns)),
            bytes: a.bytes.saturating_add(b.bytes),
            delay_min_us,
            delay_max_us: a.delay_max_us.max(b.delay_max_us),
            max_gap_us: a.max_gap_us.max(b.max_gap_us),
            samples: a.samples.saturating_add(b.samples),
            min_group,
            flags: a.flags | b.flags,
        }
    }
}

/// What a direction's rounds need from the rest of the analysis to be judged.
#[derive(Debug, Clone, Copy)]
pub struct RoundInputs {
    /// The capacity estimate, bits per second.
    pub capacity_bps: f64,
    /// A full-sized packet of the direction, bits.
    pub packet_bits: f64,
    /// Delay noise not caused by the bottleneck, seconds (twice the ACK jitter server to
    /// client; the 1-ms timestamp tick client to server).
    pub noise_s: f64,
}

/// Rounds of a direction's delivery (module doc), bounded to [`ROUND_LOG`] entries.
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    /// The length of a round as first set (one min RTT): a longer gap between deliveries
    /// means the queue emptied.
    base_window_ns: u64,
    /// Current round length (doubles when the log is coarsened).
    window_ns: u64,
    open: Option<OpenRound>,
    log: Vec<Round>,
    last_ns: u64,
    /// Flags raised before the first round opened.
    pending: u8,
    /// The first delay sample (the log's delays are relative to it) and the smallest: the
    /// base delay.
    origin: Option<i64>,
    floor: Option<i64>,
    /// Delay at each loss (the latest sample before it, µs from `origin`; `i32::MIN`
    /// without one), the first [`LOSS_LOG`].
    losses: Vec<i32>,
    losses_total: u64,
    /// Whether delay samples stay valid through recovery (one-way delays at the receiver
    /// do; RTT samples there are Karn's and absent), so that recovery does not end a run.
    samples_through_recovery: bool,
}

impl Rounds {
    /// Rounds whose delay samples stay valid through loss recovery (one-way delays at the
    /// receiver), so that a retransmission does not end a busy run; [`Rounds::default`]'s
    /// (RTT samples at the sender, which Karn's rule stops there) do not.
    pub fn through_recovery() -> Rounds {
        Rounds { samples_through_recovery: true, ..Rounds::default() }
    }

    /// A delivery of `bytes` at `now`, with the delay sample it gave (and the segments the
    /// sample's delivery covered) and flags for its round. `window_ns` is the round length
    /// to use if this is the first delivery (one min RTT).
    pub fn deliver(&mut self, now: u64, bytes: u64, sample: Option<(i64, u32)>, flags: u8, window_ns: Option<u64>) {
        if let Some((d, _)) = sample {
            self.origin.get_or_insert(d);
            self.floor = Some(self.floor.map_or(d, |f| f.min(d)));
        }
        let Some(cur) = self.open.as_mut() else {
            let w = window_ns.filter(|&w| w > 0).unwrap_or(DEFAULT_ROUND_NS);
            self.base_window_ns = w;
            self.window_ns = w;
            // The first delivery opens the first round: its bytes left before it began.
            self.open = Some(OpenRound::new(now, self.pending | flags));
            self.pending = 0;
            self.last_ns = now;
            return;
        };
        cur.bytes += bytes;
        cur.end_ns = now;
        cur.max_gap_ns = cur.max_gap_ns.max(now.saturating_sub(self.last_ns));
        cur.flags |= flags;
        if let Some((d, group)) = sample {
            if d < cur.delay_min {
                cur.delay_min = d;
                cur.min_group = group;
            }
            cur.delay_max = cur.delay_max.max(d);
            cur.samples += 1;
        }
        self.last_ns = now;
        if now.saturating_sub(cur.start_ns) >= self.window_ns {
            let done = Round::closed(cur, self.origin.unwrap_or(0));
            self.open = Some(OpenRound::new(now, 0));
            self.push(done);
        }
    }

    /// Raises `f` on the round under way.
    pub fn flag(&mut self, f: u8) {
        match self.open.as_mut() {
            Some(r) => r.flags |= f,
            None => self.pending |= f,
        }
    }

    /// A loss, with the latest delay sample before it.
    pub fn loss(&mut self, delay: Option<i64>) {
        self.losses_total += 1;
        if self.losses.len() < LOSS_LOG {
            let rel = match (delay, self.origin) {
                (Some(d), Some(o)) => ((d - o) / 1_000).clamp(i32::MIN as i64 + 1, i32::MAX as i64) as i32,
                _ => i32::MIN,
            };
            self.losses.push(rel);
        }
    }

    pub fn losses(&self) -> u64 {
        self.losses_total
    }

    fn push(&mut self, r: Round) {
        if self.log.len() >= ROUND_LOG {
            // Neighbours merged in place: the log keeps its allocation, where collecting the
            // pairs into a new vector cost an allocation, a free and a reallocation each time.
            let n = self.log.len();
            for i in 0..n / 2 {
                self.log[i] = Round::merge(self.log[2 * i], self.log[2 * i + 1]);
            }
            if n % 2 == 1 {
                self.log[n / 2] = self.log[n - 1];
            }
            self.log.truncate(n.div_ceil(2));
            self.window_ns = self.window_ns.saturating_mul(2);
        }
        self.log.push(r);
    }

    /// The rounds judged against `inputs` (none: no capacity, so no busy rounds and no
    /// queue in bytes).
    pub fn summarize(&self, inputs: Option<RoundInputs>) -> RoundSummary {
        let mut s = RoundSummary::default();
        // A run: time, bytes, and the queueing delay of its first and of its last round.
        let mut run: Option<(u64, u64, f64, f64)> = None;
        fn close_run(run: &mut Option<(u64, u64, f64, f64)>, s: &mut RoundSummary) {
            if let Some((t, b, first, last)) = run.take() {
                s.busy_ns += t;
                s.busy_bytes += b;
                s.runs += 1;
                // The cross traffic's backlog moved by at most what the queue held at the
                // run's start (all of it leaving) or at its end (all of it arriving).
                s.backlog_s += first.max(last);
            }
        }
        for r in self.judged(inputs) {
            s.rounds += 1;
            s.span_ns += r.dur_ns;
            s.bytes += r.bytes;
            s.rwnd_rounds += u64::from(r.flags & flag::RWND != 0);
            s.app_rounds += u64::from(r.flags & flag::APP != 0);
            s.retx_rounds += u64::from(r.flags & flag::RETX != 0);
            if let Some(q) = r.queue_s {
                s.queue_delay_s = Some(s.queue_delay_s.map_or(q, |m: f64| m.max(q)));
            }
            if r.busy {
                let q = r.queue_s.unwrap_or(0.0).max(0.0);
                let e = run.get_or_insert((0, 0, q, q));
                e.0 += r.dur_ns;
                e.1 += r.bytes;
                e.3 = q;
            } else {
                close_run(&mut run, &mut s);
            }
        }
        close_run(&mut run, &mut s);
        let origin = self.origin.unwrap_or(0);
        let floor = self.floor;
        let excess = |d_us: i32| floor.map(|f| (d_us as f64 * 1e3 + (origin - f) as f64) / 1e9);
        // Losses with the queue at least half as full as it ever was are congestion losses
        // [P]: the sample before a loss left the queue a little ahead of the lost packet, so
        // it shows the queue somewhat below full, by how much depends on the sender's
        // ramp; a random loss with the queue half full or more is counted as congestion.
        // Beyond the logged losses, in the logged ones' proportion.
        if let (Some(full), false) = (s.queue_delay_s, self.losses.is_empty()) {
            let congested = self.losses.iter().filter(|&&d| d != i32::MIN && excess(d).is_some_and(|q| q >= full / 2.0)).count();
            s.congestion_losses = (congested as f64 * self.losses_total as f64 / self.losses.len() as f64).round() as u64;
        }
        s
    }

    /// The rounds that lasted some time (the logged ones, then the one under way), each
    /// judged against `inputs`: its largest queueing delay, and whether the queue stood
    /// through it (busy; never without a capacity).
    fn judged(&self, inputs: Option<RoundInputs>) -> impl Iterator<Item = JudgedRound> + '_ {
        // Seconds of one packet at capacity, and the busy threshold above the sample's own
        // burst: the packet in service, one more packet, and the noise.
        let (pkt_s, thr_s) = match inputs {
            Some(i) if i.capacity_bps > 0.0 => {
                let p = i.packet_bits / i.capacity_bps;
                (p, 2.0 * p + i.noise_s)
            }
            _ => (f64::NAN, f64::INFINITY),
        };
        let origin = self.origin.unwrap_or(0);
        let floor = self.floor;
        // Seconds above the base delay, of a delay in µs from the origin.
        let excess = move |d_us: i32| floor.map(|f| (d_us as f64 * 1e3 + (origin - f) as f64) / 1e9);
        let open = self.open.as_ref().map(|r| Round::closed(r, origin));
        self.log.iter().copied().chain(open).filter(|r| r.dur_us > 0).map(move |r| {
            let queue_s = if r.samples > 0 { excess(r.delay_max_us) } else { None };
            let busy = r.samples > 0
                && (self.samples_through_recovery || r.flags & flag::RETX == 0)
                && r.max_gap_us as u64 * 1_000 <= self.base_window_ns
                && excess(r.delay_min_us).is_some_and(|e| e - r.min_group as f64 * pkt_s >= thr_s);
            JudgedRound { start_ns: r.start_ns, dur_ns: r.dur_us as u64 * 1_000, bytes: r.bytes as u64, flags: r.flags, queue_s, busy }
        })
    }

    /// The cross traffic over time (iBox, ALGORITHMS.md §9), in bins of at least `bin_ns`
    /// made of whole rounds. While the queue stands the link sends at C, so what the
    /// foreground did not get went to cross traffic: a bin whose rounds were busy for at
    /// least half its time gives C − (its busy bytes / busy time) as a point, with the
    /// error bound of the ABW's (the largest queue's backlog over the busy time); any other
    /// bin bounds the cross traffic from above only, by C − its delivery rate. Without a
    /// capacity there is no profile.
    pub fn cross_traffic(&self, inputs: Option<RoundInputs>, bin_ns: u64) -> Vec<CrossBin> {
        let Some(c) = inputs.map(|i| i.capacity_bps).filter(|&c| c > 0.0) else { return Vec::new() };
        let mut bins = Vec::new();
        // (start, time, bytes, busy time, busy bytes, largest queue while busy)
        let mut acc: Option<(u64, u64, u64, u64, u64, f64)> = None;
        let emit = |a: (u64, u64, u64, u64, u64, f64), bins: &mut Vec<CrossBin>| {
            let (start, dur, bytes, busy, busy_bytes, q) = a;
            let point = busy > 0 && 2 * busy >= dur;
            let (fg, err) = if point {
                let secs = busy as f64 / 1e9;
                (busy_bytes as f64 * 8.0 / secs, Some(q * c / secs))
            } else {
                (bytes as f64 * 8.0 / (dur as f64 / 1e9), None)
            };
            bins.push(CrossBin { start_ns: start, dur_ns: dur, busy_ns: busy, foreground_bps: fg, cross_bps: (c - fg).max(0.0), error_bps: err, point });
        };
        for r in self.judged(inputs) {
            let a = acc.get_or_insert((r.start_ns, 0, 0, 0, 0, 0.0));
            a.1 += r.dur_ns;
            a.2 += r.bytes;
            if r.busy {
                a.3 += r.dur_ns;
                a.4 += r.bytes;
                a.5 = a.5.max(r.queue_s.unwrap_or(0.0).max(0.0));
            }
            if a.1 >= bin_ns {
                emit(*a, &mut bins);
                acc = None;
            }
        }
        // A last bin shorter than half a bin says too little.
        if let Some(a) = acc.filter(|a| 2 * a.1 >= bin_ns) {
            emit(a, &mut bins);
        }
        bins
    }
}

/// A round judged (see [`Rounds::judged`]).
#[derive(Debug, Clone, Copy)]
struct JudgedRound {
    start_ns: u64,
    dur_ns: u64,
    bytes: u64,
    flags: u8,
    queue_s: Option<f64>,
    busy: bool,
}

/// A bin of a direction's cross-traffic profile ([`Rounds::cross_traffic`]); rates in bit/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossBin {
    /// Capture time of the bin's first round, and the bin's length.
    pub start_ns: u64,
    pub dur_ns: u64,
    /// Time in busy rounds.
    pub busy_ns: u64,
    /// The foreground's delivery rate over the busy rounds (a point) or the whole bin.
    pub foreground_bps: f64,
    /// C − foreground: the cross traffic (a point), or an upper bound on it.
    pub cross_bps: f64,
    /// A point's error bound.
    pub error_bps: Option<f64>,
    pub point: bool,
}

/// What a direction's rounds say once judged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RoundSummary {
    /// Rounds that lasted some time, their total time and bytes.
    pub rounds: u64,
    pub span_ns: u64,
    pub bytes: u64,
    /// Busy rounds: their time and bytes, the runs they form, and the sum over runs of the
    /// larger queueing delay of a run's first and last rounds (seconds; × C is the ABW error
    /// bound's backlog).
    pub busy_ns: u64,
    pub busy_bytes: u64,
    pub runs: u64,
    pub backlog_s: f64,
    /// Largest queueing delay of any sample, seconds.
    pub queue_delay_s: Option<f64>,
    pub rwnd_rounds: u64,
    pub app_rounds: u64,
    pub retx_rounds: u64,
    pub congestion_losses: u64,
}

/// What limited a direction's transfer (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// No data went this way.
    None,
    /// The queue stood for whole rounds: the ABW is a point estimate.
    Network,
    /// Most rounds filled the receiver's advertised window.
    ReceiverWindow,
    /// Most rounds had a burst the sender started on its own, or followed an idle time.
    Application,
    /// Losses, but the queue never stood (a loss-limited window), or it stood too briefly
    /// for a point estimate.
    Loss,
    /// None of the above: too short to leave slow start.
    SlowStart,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::None => "none",
            Limit::Network => "network",
            Limit::ReceiverWindow => "receiver window",
            Limit::Application => "application",
            Limit::Loss => "loss",
            Limit::SlowStart => "slow start",
        }
    }
}

/// One direction's estimates (module doc); rates in bit/s, times in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DirectionEstimate {
    pub capacity: Option<PairEstimate>,
    /// ABW and its error bound, when the bound is within [`POINT_BOUND`] of it.
    pub abw_bps: Option<f64>,
    pub abw_error_bps: Option<f64>,
    /// Time in busy rounds.
    pub busy_s: f64,
    /// Delivery rate over the whole transfer.
    pub throughput_bps: Option<f64>,
    /// The best lower bound on ABW: the throughput less its backlog term, or a busy
    /// estimate less its error when that was not tight enough for a point.
    pub abw_floor_bps: Option<f64>,
    pub queue_delay_s: Option<f64>,
    pub limit: Limit,
    /// Shares of rounds that filled the receiver's window / that the application paced.
    pub rwnd_share: Option<f64>,
    pub app_share: Option<f64>,
    pub losses: u64,
    pub congestion_losses: u64,
}

/// How a direction's delay samples were taken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delays {
    /// RTT samples at the sender, over a base from the handshake's small packets: a data
    /// sample also carries its own transmission at the bottleneck.
    Rtt,
    /// One-way delays from timestamps with this tick (seconds), over a base that was itself
    /// a data segment.
    OneWay { tick_s: f64 },
}

/// What the rounds are judged against: the capacity, a full-sized packet's bits, and the
/// delay noise (twice the ACK jitter, plus the timestamp tick for one-way delays).
fn round_inputs(capacity: Option<PairEstimate>, packet_bits: f64, delays: Delays) -> Option<RoundInputs> {
    let extra_noise_s = match delays {
        Delays::Rtt => 0.0,
        Delays::OneWay { tick_s } => tick_s,
    };
    capacity.map(|c| RoundInputs { capacity_bps: c.rate_bps, packet_bits, noise_s: 2.0 * c.jitter_s + extra_noise_s })
}

/// A direction's cross traffic over time ([`Rounds::cross_traffic`]), in bins of at least
/// `bin_ns`, against the capacity of its pairs.
pub fn cross_traffic(pairs: &PairPool, rounds: &Rounds, packet_bits: f64, delays: Delays, bin_ns: u64) -> Vec<CrossBin> {
    rounds.cross_traffic(round_inputs(pairs.estimate(), packet_bits, delays), bin_ns)
}

/// Judges a direction from its pairs and rounds, with a full-sized packet's bits.
pub fn estimate(pairs: &PairPool, rounds: &Rounds, packet_bits: f64, delays: Delays) -> DirectionEstimate {
    let capacity = pairs.estimate();
    let s = rounds.summarize(round_inputs(capacity, packet_bits, delays));
    let c_bps = capacity.map(|c| c.rate_bps);
    let busy_s = s.busy_ns as f64 / 1e9;
    let (busy_abw, busy_err) = match c_bps {
        Some(c) if s.busy_ns > 0 => (Some(s.busy_bytes as f64 * 8.0 / busy_s), Some(s.backlog_s * c / busy_s)),
        _ => (None, None),
    };
    let point = matches!((busy_abw, busy_err), (Some(a), Some(e)) if a > 0.0 && e <= POINT_BOUND * a);
    let span_s = s.span_ns as f64 / 1e9;
    let throughput_bps = (s.span_ns > 0).then(|| s.bytes as f64 * 8.0 / span_s);
    let floor_from_throughput = match (throughput_bps, c_bps) {
        (Some(t), Some(c)) => Some((t - s.queue_delay_s.unwrap_or(0.0).max(0.0) * c / span_s).max(0.0)),
        _ => None,
    };
    let floor_from_busy = busy_abw.zip(busy_err).map(|(a, e)| (a - e).max(0.0));
    let abw_floor_bps = match (floor_from_throughput, floor_from_busy) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let share = |n: u64| (s.rounds > 0).then(|| n as f64 / s.rounds as f64);
    let (rwnd_share, app_share) = (share(s.rwnd_rounds), share(s.app_rounds));
    let limit = if s.rounds == 0 || s.bytes == 0 {
        Limit::None
    } else if point {
        Limit::Network
    } else if rwnd_share.is_some_and(|x| x >= 0.5) {
        Limit::ReceiverWindow
    } else if app_share.is_some_and(|x| x >= 0.5) {
        Limit::Application
    } else if rounds.losses() > 0 || s.retx_rounds > 0 || s.busy_ns > 0 {
        Limit::Loss
    } else {
        Limit::SlowStart
    };
    DirectionEstimate {
        capacity,
        abw_bps: busy_abw.filter(|_| point),
        abw_error_bps: busy_err.filter(|_| point),
        busy_s,
        throughput_bps,
        abw_floor_bps,
        // The queue ahead of the fullest sample: less its own transmission where the base
        // did not include one.
        queue_delay_s: s.queue_delay_s.map(|q| match (delays, c_bps) {
            (Delays::Rtt, Some(c)) => (q - packet_bits / c).max(0.0),
            _ => q.max(0.0),
        }),
        limit,
        rwnd_share,
        app_share,
        losses: rounds.losses(),
        congestion_losses: s.congestion_losses,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bursts of back-to-back pairs at 20 Mbit/s whose ACKs are each delayed by a residual
    /// in [0, 0.6 ms) (reverse cross traffic): the pooled rate stays within its standard
    /// error of the truth, while single pairs scatter from half to far above it.
    #[test]
    fn pooled_pairs_see_through_ack_jitter() {
        let pkt = 12_000.0; // 1500 B
        let c = 20e6;
        let mut pool = PairPool::default();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut jitter = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 600) as f64 * 1e-6
        };
        for burst in 0..40 {
            // ACK k of the burst: k packet times after the first, plus its own residual.
            let mut prev = jitter();
            for _ in 1..4 {
                let r = jitter();
                pool.add(burst, pkt, pkt / c + r - prev);
                prev = r;
            }
        }
        let e = pool.estimate().unwrap();
        let se = e.se_bps.unwrap();
        assert!((e.rate_bps - c).abs() <= 3.0 * se, "{e:?}");
        assert!(se < 0.05 * c, "{e:?}");
        assert_eq!((e.pairs, e.bursts), (120, 40));
        // Uniform residuals on 0.6 ms differ by 0.6/√6 ms RMS.
        assert!((e.jitter_s - 0.6e-3 / 6f64.sqrt()).abs() < 0.1e-3, "{e:?}");
    }

    fn round_feed(rounds: &mut Rounds, t0: u64, n: u64, every_ns: u64, bytes: u64, delay: impl Fn(u64) -> i64, flags: u8) {
        for k in 0..n {
            rounds.deliver(t0 + k * every_ns, bytes, Some((delay(k), 2)), flags, Some(40_000_000));
        }
    }

    /// A flow that keeps a 20-ms queue standing at 20 Mbit/s and gets 5 Mbit/s: busy
    /// rounds, the ABW as a point estimate with the backlog bound, the queue's delay.
    #[test]
    fn a_standing_queue_gives_the_abw() {
        let mut r = Rounds::default();
        let base = 40_000_000i64;
        // 3000 B every 4.8 ms = 5 Mbit/s, for 3 s, delay 40 ms + 20..22 ms.
        round_feed(&mut r, 0, 625, 4_800_000, 3000, |k| base + 20_000_000 + (k % 3) as i64 * 1_000_000, 0);
        // The handshake's sample sets the base.
        r.deliver(3_000_000_000, 0, Some((base, 0)), 0, None);
        let s = r.summarize(Some(RoundInputs { capacity_bps: 20e6, packet_bits: 12_000.0, noise_s: 0.0005 }));
        assert_eq!(s.runs, 1);
        let abw = s.busy_bytes as f64 * 8.0 / (s.busy_ns as f64 / 1e9);
        assert!((abw - 5e6).abs() < 0.05e6, "{abw} {s:?}");
        assert!((s.queue_delay_s.unwrap() - 0.022).abs() < 1e-9);
        // Error: 22 ms × 20 Mbit/s over ~3 s.
        assert!((s.backlog_s - 0.022).abs() < 1e-9, "{s:?}");
    }

    /// Samples that come back near the base every round (a sender below the ABW) make no
    /// busy round, whatever the others show.
    #[test]
    fn a_queue_that_empties_every_round_is_not_busy() {
        let mut r = Rounds::default();
        let base = 40_000_000i64;
        round_feed(&mut r, 0, 400, 5_000_000, 3000, |k| base + if k % 4 == 0 { 600_000 } else { 6_000_000 }, 0);
        let s = r.summarize(Some(RoundInputs { capacity_bps: 20e6, packet_bits: 12_000.0, noise_s: 0.0005 }));
        assert_eq!((s.runs, s.busy_ns), (0, 0));
        assert!(s.rounds > 40);
    }

    /// The log stays bounded: rounds merge in pairs, keeping bytes, time and extremes.
    #[test]
    fn the_round_log_is_bounded() {
        let mut r = Rounds::default();
        for k in 0..10_000u64 {
            r.deliver(k * 10_000_000, 100, Some((1_000_000 + (k % 7) as i64 * 1_000, 1)), if k == 5000 { flag::RETX } else { 0 }, Some(40_000_000));
        }
        assert!(r.log.len() <= ROUND_LOG);
        let s = r.summarize(None);
        // Everything after the first delivery is in some round.
        assert_eq!(s.bytes, 100 * 9_999);
        assert_eq!(s.span_ns, 9_999 * 10_000_000);
        assert_eq!(s.retx_rounds, 1);
        // Delays are kept to the microsecond.
        assert!((s.queue_delay_s.unwrap() - 6e-6).abs() < 1e-12, "{s:?}");
    }
}

/// A server-side capture of one transfer through a modelled bottleneck, fed to a [`Conn`]:
/// the estimates against the model's truth.
#[cfg(test)]
mod lab {
    use crate::conn::{Conn, DOWN, UP};
    use crate::decode::{flags, TcpHeader};
    use crate::record::ConnRecord;
    use std::collections::BTreeMap;
    use std::net::IpAddr;

    const MS: u64 = 1_000_000;
    /// Payload and IP length of a full segment.
    const MSS: u64 = 1460;
    const WIRE: u64 = 1500;

    /// The path: capacity, CBR cross traffic of full-sized packets at `cross_bps` (from each
    /// of `cross_steps`' times, capture time, at its rate), one-way delays before the
    /// bottleneck and back; a FIFO without a limit.
    struct Lab {
        capacity_bps: f64,
        cross_bps: f64,
        cross_steps: &'static [(u64, f64)],
        forward_ns: u64,
        reverse_ns: u64,
    }

    impl Lab {
        /// A transfer of `segments` full segments by a sender keeping at most `window`
        /// bytes in flight (the client's advertised window, also sent in its ACKs), the
        /// client acknowledging every second segment at once. Returns the connection.
        fn run(&self, segments: u64, window: u16) -> Conn {
            let ip = IpAddr::from([10, 0, 0, 1]);
            let mut c = Conn::new(0, (ip, 40000), (ip, 80), true, 0);
            // Packets as the capture shows them, in time order: (time, direction, flags,
            // seq, ack, payload length).
            let mut log: Vec<(u64, usize, u8, u32, u32, u32)> = Vec::new();
            let rtt = self.forward_ns + self.reverse_ns;
            let (ci, si) = (1000u32, 5000u32);
            let (req, data) = (ci + 101, si + 1);
            log.push((0, UP, flags::SYN, ci, 0, 0));
            log.push((100_000, DOWN, flags::SYN | flags::ACK, si, ci + 1, 0));
            log.push((100_000 + rtt, UP, flags::ACK, ci + 1, data, 0));
            let start = 100_000 + rtt + 100_000;
            log.push((start, UP, flags::ACK, ci + 1, data, 100));
            let mut link = Bottleneck::new(self);
            // ACK arrivals at the server: time -> segments acknowledged.
            let mut acks: BTreeMap<u64, u64> = BTreeMap::new();
            let (mut sent, mut received) = (0u64, 0u64);
            let mut now = start + 50_000;
            let mut acked = 0;
            loop {
                while sent < segments && (sent + 1 - acked) * MSS <= window as u64 {
                    log.push((now, DOWN, flags::ACK, data + (sent * MSS) as u32, req, MSS as u32));
                    sent += 1;
                    let at_client = link.depart((now + self.forward_ns) as f64) as u64;
                    received += 1;
                    if received % 2 == 0 || received == segments {
                        acks.insert(at_client + self.reverse_ns, received);
                    }
                }
                let Some((&t, &k)) = acks.iter().next() else { break };
                acks.remove(&t);
                (now, acked) = (t, k);
                log.push((t, UP, flags::ACK, req, data + (k * MSS) as u32, 0));
            }
            let fin = data + (segments * MSS) as u32;
            let end = now + MS;
            log.push((end, DOWN, flags::ACK | flags::FIN, fin, req, 0));
            log.push((end + rtt, UP, flags::ACK | flags::FIN, req, fin + 1, 0));
            log.push((end + rtt + MS, DOWN, flags::ACK, fin + 1, req + 1, 0));
            log.sort_by_key(|p| p.0);
            const MSS_OPTION: [u8; 4] = [2, 4, 5, 180];
            for (t, dir, fl, seq, ack, len) in log {
                let options: &[u8] = if fl & flags::SYN != 0 && dir == UP { &MSS_OPTION } else { &[] };
                let h = TcpHeader { src_port: 0, dst_port: 0, seq, ack, flags: fl, window, raw_options: options, payload_len: len };
                c.on_segment(dir, t, &h, &[], 40 + len);
            }
            c
        }
    }

    /// The FIFO of a [`Lab`]: busy until `busy`, cross traffic arriving every `gap` (the gap
    /// of the step in force, none at zero rate).
    struct Bottleneck {
        pkt_ns: f64,
        /// (from, gap), in time order; the first from time zero.
        gaps: Vec<(f64, Option<f64>)>,
        busy: f64,
        next_cross: f64,
    }

    impl Bottleneck {
        fn new(lab: &Lab) -> Bottleneck {
            let pkt_ns = WIRE as f64 * 8e9 / lab.capacity_bps;
            let gap = |bps: f64| (bps > 0.0).then(|| WIRE as f64 * 8e9 / bps);
            let mut gaps = vec![(0.0, gap(lab.cross_bps))];
            gaps.extend(lab.cross_steps.iter().map(|&(t, bps)| (t as f64, gap(bps))));
            Bottleneck { pkt_ns, gaps, busy: 0.0, next_cross: 0.0 }
        }

        /// When a foreground packet arriving at `arrive` has left (cross traffic that came
        /// before it first).
        fn depart(&mut self, arrive: f64) -> f64 {
            loop {
                let step = self.gaps.partition_point(|g| g.0 <= self.next_cross) - 1;
                let Some(g) = self.gaps[step].1 else {
                    // No cross traffic now: the next arrival is at the next step with some.
                    match self.gaps[step + 1..].iter().find(|g| g.1.is_some()) {
                        Some(&(from, _)) if from <= arrive => {
                            self.next_cross = from;
                            continue;
                        }
                        _ => break,
                    }
                };
                if self.next_cross > arrive {
                    break;
                }
                self.busy = self.busy.max(self.next_cross) + self.pkt_ns;
                self.next_cross += g;
            }
            self.busy = self.busy.max(arrive) + self.pkt_ns;
            self.busy
        }
    }

    const PATH: Lab = Lab { capacity_bps: 20e6, cross_bps: 15e6, cross_steps: &[], forward_ns: 20 * MS, reverse_ns: 20 * MS };

    /// A window far above the path's BDP at its ABW keeps a queue standing: capacity from
    /// the first window's ACK pairs, the ABW (C − cross traffic) within its own error bound,
    /// the queue's delay, "network" — although the sender also filled the receiver's window.
    #[test]
    fn a_standing_queue_gives_capacity_and_abw_apart() {
        let r = ConnRecord::from_conn(&PATH.run(1500, 65535));
        let c = r.capacity_s2c_bps.unwrap();
        assert!((c / 20e6 - 1.0).abs() < 0.01, "{c}");
        let (abw, err) = (r.abw_s2c_bps.unwrap(), r.abw_s2c_error_bps.unwrap());
        assert!((abw - 5e6).abs() <= err && err < 0.1 * abw, "{abw} ± {err}");
        assert_eq!(r.limit_s2c.as_deref(), Some("network"));
        assert!(r.rwnd_limited_s2c.unwrap() > 0.9);
        // 44 segments (66 000 B) in flight against a BDP of 25 000 B at 5 Mbit/s: the
        // other 41 000 B stand in the queue, each behind three times as much cross traffic,
        // so they wait 41 000 B / 5 Mbit/s = 65.6 ms.
        let q = r.queue_delay_s2c_ms.unwrap();
        assert!((60.0..68.0).contains(&q), "{q}");
        assert_eq!((r.capacity_c2s_bps, r.limit_c2s.as_deref()), (None, Some("none")));
    }

    /// A receiver window below the BDP at the ABW: no standing queue, no ABW point estimate,
    /// "receiver window", and a floor no higher than what the flow got.
    #[test]
    fn a_receiver_window_limit_gives_no_abw() {
        let r = ConnRecord::from_conn(&PATH.run(600, 8 * MSS as u16));
        assert_eq!(r.abw_s2c_bps, None);
        assert_eq!(r.limit_s2c.as_deref(), Some("receiver window"));
        let t = r.throughput_s2c_bps.unwrap();
        // 8 segments per 40-ms round trip.
        assert!((t / (8.0 * WIRE as f64 * 8.0 / 0.040) - 1.0).abs() < 0.1, "{t}");
        assert!(r.abw_s2c_floor_bps.unwrap() <= t);
        assert!((r.capacity_s2c_bps.unwrap() / 20e6 - 1.0).abs() < 0.01);
    }

    /// Cross traffic of 5, then 15, then 10 Mbit/s on a 20 Mbit/s link (iBox's case): every
    /// bin of the profile that lies within one step and kept the queue standing gives that
    /// step's rate within its own error bound, and the bins cover the transfer.
    #[test]
    fn the_cross_traffic_profile_follows_its_steps() {
        let steps: &[(u64, f64)] = &[(3_000 * MS, 15e6), (6_000 * MS, 10e6)];
        let lab = Lab { capacity_bps: 20e6, cross_bps: 5e6, cross_steps: steps, forward_ns: 10 * MS, reverse_ns: 10 * MS };
        // 15, 5 and 10 Mbit/s of ABW for 3 s each, and a little more.
        let c = lab.run(8_000, 65535);
        let d = &c.down;
        let bins = super::cross_traffic(&d.cap, &d.rounds(), d.max_wire as f64 * 8.0, super::Delays::Rtt, 1_000 * MS);
        let truth = |t: u64| steps.iter().rev().find(|s| s.0 <= t).map_or(5e6, |s| s.1);
        let mut checked = 0;
        for b in &bins {
            assert!(b.cross_bps >= 0.0 && b.cross_bps <= 20e6, "{b:?}");
            let (from, to) = (b.start_ns, b.start_ns + b.dur_ns);
            if truth(from) != truth(to) || !b.point {
                // A bound holds whatever the step: the cross traffic was at most it.
                assert!(b.point || b.cross_bps + 0.02 * 20e6 >= truth(from).min(truth(to)), "{b:?}");
                continue;
            }
            let err = b.error_bps.unwrap();
            // The error bound, plus the capacity estimate's own half per cent.
            assert!((b.cross_bps - truth(from)).abs() <= err + 0.005 * 20e6, "{b:?} against {}", truth(from));
            assert!(err < 0.1 * 20e6, "{b:?}");
            checked += 1;
        }
        assert!(checked >= 5, "only {checked} of {} bins were points within one step: {bins:?}", bins.len());
        let span: u64 = bins.iter().map(|b| b.dur_ns).sum();
        assert!(span as f64 > 8.5e9, "{span}");
    }
}
