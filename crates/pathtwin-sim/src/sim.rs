//! The simulation: connections, the event loop, and metric collection.
//!
//! A flow runs over the route between its hosts or, with `pipe = N`, over `[[pipe]]` N
//! (Monkey Do's per-connection path, one per replayed connection) from that pipe's own
//! client address ([`pcap::pipe_addr`]); the `pipes` results table lists those addresses.
//! With `[run] until_done` the run ends once every connection has closed at both ends.

use crate::app::App;
use crate::event::{AppStep, Event, EventQueue};
use crate::packet::{SegmentSlab, SimPacket};
use crate::pcap::{self, PcapWriter};
use crate::replay::{Replay, Step, CLIENT, SERVER};
use std::path::Path;
use std::sync::Arc;
use crate::table::{Cell, Table};
use crate::tcp_settings::check_tables_used;
use pathtwin_core::config::{Config, ConfigError, FlowConfig};
use pathtwin_core::element::Element;
use pathtwin_core::qdisc::AqmStats;
use pathtwin_core::time::{Duration, Instant};
use pathtwin_core::topology::{self, Hop, Network, RouteScope};
use std::collections::HashMap;
use pathtwin_core::units::Rate;
use pathtwin_tcp::{Endpoint, Event as TcpEvent, TcpConfig};
use rand::Rng as _;

/// Why a simulation could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The config is invalid (its message names the key).
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// One simulated TCP connection and its application.
struct Connection {
    /// Index of the `[[flow]]` entry it comes from, and its copy number within `count`.
    flow_entry: usize,
    copy: u32,
    label: String,
    hosts: [u32; 2],
    /// IPv4 addresses of the client and the server in captures.
    addrs: [[u8; 4]; 2],
    endpoints: [Endpoint; 2],
    timers: [Option<Instant>; 2],
    app: App,
    start: Instant,
    stop: Option<Instant>,
    cc: &'static str,
    /// Bytes the server had read when the flow's measuring window closed (stop or run end).
    delivered_at_stop: Option<u64>,
    /// When a sized bulk transfer was completely read by the server.
    completed_at: Option<Instant>,
    /// Bytes read at the previous sample (for per-interval goodput).
    delivered_at_last_sample: u64,
    started: bool,
    /// Which ends have closed (TCP's `Closed` event, or a reset).
    closed: [bool; 2],
}

impl Connection {
    /// Bytes read by the applications at both ends (request/response counts both ways).
    fn delivered(&self) -> u64 {
        self.endpoints[SERVER].stats().bytes_delivered
            + match self.app {
                App::ReqResp(_) | App::Replay(_) => self.endpoints[CLIENT].stats().bytes_delivered,
                _ => 0,
            }
    }
}

/// The tables of a finished (or interrupted) run. The time series are shared with the
/// simulation, not copied: they are the bulk of a long run's memory, and a copy doubled its
/// peak (a simulated hour of 100 flows).
#[derive(Clone, Debug)]
pub struct Results {
    pub flows: Table,
    pub flow_series: Arc<Table>,
    pub queues: Table,
    pub queue_series: Arc<Table>,
    /// One row per `[[marker]]`: IN/OUT and per-colour packets and bytes.
    pub markers: Table,
    /// One row per `[[pipe]]`: its client host, server host and client address.
    pub pipes: Table,
    /// Simulated seconds covered.
    pub simulated_s: f64,
    /// Events processed.
    pub events: u64,
    /// Whether the run reached its configured duration.
    pub complete: bool,
}

/// `element_wakeup`'s "none pending" (no event is ever that late).
const NO_WAKEUP: u64 = u64::MAX;

/// A route's hops within the simulation's flat hop table.
#[derive(Clone, Copy, Debug)]
struct RouteSpan {
    start: u32,
    len: u32,
}

impl RouteSpan {
    /// Appends `hops` to `table` and returns where they lie.
    fn append(table: &mut Vec<Hop>, hops: &[Hop]) -> RouteSpan {
        let start = table.len() as u32;
        table.extend_from_slice(hops);
        RouteSpan { start, len: hops.len() as u32 }
    }
}

pub struct Simulation {
    cfg: Config,
    net: Network<SimPacket>,
    events: EventQueue,
    /// Per element, the time of its pending wakeup in nanoseconds, [`NO_WAKEUP`] if none (8
    /// bytes an element: with thousands of flows the table is read at every hop).
    element_wakeup: Vec<u64>,
    conns: Vec<Connection>,
    segments: SegmentSlab,
    end: Instant,
    sample_interval: Duration,
    /// Shared with the [`Results`] taken so far; a sample after that copies them first.
    flow_series: Arc<Table>,
    queue_series: Arc<Table>,
    /// Drops at the previous sample, per element (for per-interval drop counts).
    drops_at_last_sample: Vec<u64>,
    /// Whether no event is left before the end (updated by `advance`).
    finished: bool,
    /// Capture writers by host index (hosts listed in `[run] pcap`).
    captures: Vec<Option<PcapWriter>>,
    /// Per connection, where its hops from client to server and back (its pipe's, or its
    /// hosts' route) lie in `route_hops`, resolved once for the per-hop lookup. One flat
    /// table, not a small allocation per route: with thousands of flows every hop looked
    /// one up from memory.
    conn_routes: Vec<[RouteSpan; 2]>,
    route_hops: Vec<Hop>,
    /// Connections closed at both ends.
    done_conns: usize,
    /// Scratch list of the replay application's steps.
    replay_steps: Vec<Step>,
}

/// Monaco measures its queueing with out-of-band packets that strict-priority queues serve
/// first; behind any other discipline they wait with the data, the estimate reads no queue,
/// and the flow grows its window until loss. Says which queue on flow `i`'s routes is not
/// `qdisc = "prio"`, if any.
fn monaco_without_priority(net: &Network<SimPacket>, i: usize, routes: [&[Hop]; 2]) -> Option<String> {
    let hops = routes.into_iter().flatten();
    let (e, q) = hops.filter_map(|h| Some((h.element, net.elements[h.element].as_queue()?))).find(|(_, q)| q.qdisc_name() != "prio")?;
    Some(format!(
        "flow[{i}]: Monaco needs qdisc = \"prio\" on its routes for its out-of-band packets; queue {} is {:?}, where Monaco's estimate sees no queue",
        net.element_info[e].name,
        q.qdisc_name()
    ))
}

impl Simulation {
    /// Builds a simulation from a validated config.
    pub fn new(cfg: Config) -> Result<Simulation, SimError> {
        if cfg.monarch.is_some() {
            // The proxy carries a real application's kernel TCP as probes to a real host.
            return Err(ConfigError::invalid("monarch", "[monarch] is for the emulator: its proxy carries a kernel TCP flow as probes").into());
        }
        // Routes only for the host pairs the flows use, both ways: a links-view topology of
        // n hosts has n² pairs, 4·10⁸ in a 10 000-flow dumbbell.
        let pairs: Vec<(usize, usize)> = {
            let id: HashMap<&str, usize> = cfg.hosts.iter().enumerate().map(|(i, h)| (h.as_str(), i)).collect();
            let ends = |f: &FlowConfig| id.get(f.from.as_str()).zip(id.get(f.to.as_str())).map(|(&a, &b)| (a, b));
            cfg.flows.iter().filter(|f| f.pipe.is_none()).filter_map(ends).flat_map(|(a, b)| [(a, b), (b, a)]).collect()
        };
        let mut net: Network<SimPacket> = topology::compile_scoped(&cfg, RouteScope::Pairs(&pairs))?;
        let mut events = EventQueue::new();
        let mut conns = Vec::new();
        let mut conn_routes = Vec::new();
        let mut route_hops = Vec::new();
        let mut isn_rng = pathtwin_core::rng_for(cfg.run.seed, u64::MAX);
        TcpConfig::check_tables(&cfg.tcp, "tcp")?;
        let mut controllers_used: Vec<&'static str> = Vec::new();
        for (i, f) in cfg.flows.iter().enumerate() {
            let (a, b) = (net.host_id(&f.from).expect("validated"), net.host_id(&f.to).expect("validated"));
            // Validation checked that a pipe flow's hosts are its pipe's ends.
            let hops: [Box<[Hop]>; 2] = match f.pipe {
                Some(p) => {
                    let r = &net.pipes[p as usize];
                    [r.up.as_slice().into(), r.down.as_slice().into()]
                }
                None => match (net.route(a, b), net.route(b, a)) {
                    (Some(up), Some(down)) => [up.into(), down.into()],
                    _ => return Err(ConfigError::invalid(format!("flow[{i}]"), format!("no route between {} and {}", f.from, f.to)).into()),
                },
            };
            let client_addr = f.pipe.map_or(pcap::host_addr(a as u32), pcap::pipe_addr);
            TcpConfig::check_tables(&f.tcp, &format!("flow[{i}].tcp"))?;
            let mut settings = cfg.tcp.overridden_by(&f.tcp);
            let cc_key = match (&f.cc, &f.tcp.cc) {
                (Some(cc), _) => {
                    settings.cc = Some(cc.clone());
                    format!("flow[{i}]")
                }
                (None, Some(_)) => format!("flow[{i}].tcp"),
                (None, None) => "tcp".to_string(),
            };
            let tcp = TcpConfig::from_settings(&settings, &cc_key)?;
            check_tables_used(&f.tcp, &[tcp.cc.config_name()], &format!("flow[{i}].tcp"))?;
            controllers_used.push(tcp.cc.config_name());
            if tcp.cc.uses_control_packets() {
                if let Some(w) = monaco_without_priority(&net, i, [&hops[0], &hops[1]]) {
                    net.warnings.push(w);
                }
            }
            if tcp.mss < 64 || tcp.mss > 65_000 {
                return Err(ConfigError::invalid(format!("flow[{i}].tcp.mss"), format!("{} is outside 64..65000 bytes", tcp.mss)).into());
            }
            // The copies of a flow entry share its route.
            let spans = hops.each_ref().map(|h| RouteSpan::append(&mut route_hops, h));
            for copy in 0..f.count {
                let id = conns.len() as u32;
                let start = Instant::ZERO + f.start;
                let label = match (&f.label, f.count) {
                    (Some(l), 1) => l.clone(),
                    (Some(l), _) => format!("{l}#{copy}"),
                    (None, 1) => format!("{}->{}", f.from, f.to),
                    (None, _) => format!("{}->{}#{copy}", f.from, f.to),
                };
                let isn_c: u64 = isn_rng.gen::<u32>() as u64;
                let isn_s: u64 = isn_rng.gen::<u32>() as u64;
                conns.push(Connection {
                    flow_entry: i,
                    copy,
                    label,
                    hosts: [a as u32, b as u32],
                    addrs: [client_addr, pcap::host_addr(b as u32)],
                    endpoints: [Endpoint::connect(tcp.clone(), start, isn_c), Endpoint::listen(tcp.clone(), isn_s)],
                    timers: [None, None],
                    app: App::from_config(f),
                    start,
                    stop: f.stop.map(|s| Instant::ZERO + s),
                    cc: tcp.cc.name(),
                    delivered_at_stop: None,
                    completed_at: None,
                    delivered_at_last_sample: 0,
                    started: false,
                    closed: [false; 2],
                });
                conn_routes.push(spans);
                events.schedule(start, Event::App(id, AppStep::Start));
                if let Some(s) = f.stop {
                    events.schedule(Instant::ZERO + s, Event::App(id, AppStep::Stop));
                }
            }
        }
        check_tables_used(&cfg.tcp, &controllers_used, "tcp")?;
        events.schedule(Instant::ZERO, Event::Sample);
        let n_elements = net.elements.len();
        // Validation keeps the interval positive; a hint need not rely on it.
        let samples = cfg.run.duration.as_nanos().checked_div(cfg.run.sample_interval.as_nanos()).map_or(0, |n| n as usize + 1);
        let (n_conns, n_queues) = (conns.len(), net.queue_ids().count());
        let mut sim = Simulation {
            end: Instant::ZERO + cfg.run.duration,
            sample_interval: cfg.run.sample_interval,
            cfg,
            net,
            events,
            element_wakeup: vec![NO_WAKEUP; n_elements],
            conns,
            segments: SegmentSlab::default(),
            flow_series: Arc::new(Table::with_schema(&[
                ("time_s", "f64"),
                ("flow", "i64"),
                ("label", "category"),
                ("cwnd_bytes", "i64"),
                ("ssthresh_bytes", "i64"),
                ("srtt_ms", "f64"),
                ("goodput_bps", "f64"),
                ("delivered_bytes", "i64"),
                ("retransmits", "i64"),
            ])),
            queue_series: Arc::new(Table::with_schema(&[
                ("time_s", "f64"),
                ("queue", "category"),
                ("packets", "i64"),
                ("bytes", "i64"),
                ("placeholder_packets", "i64"),
                ("placeholder_bytes", "i64"),
                ("drops", "i64"),
                ("departed_bytes", "i64"),
                ("abw_bps", "f64"),
                ("active_flows", "i64"),
                ("avg_queue", "f64"),
            ])),
            drops_at_last_sample: vec![0; n_elements],
            finished: false,
            captures: Vec::new(),
            conn_routes,
            route_hops,
            done_conns: 0,
            replay_steps: Vec::new(),
        };
        // A row per started flow and per queue at every sample.
        Arc::make_mut(&mut sim.flow_series).reserve(samples.saturating_mul(n_conns));
        Arc::make_mut(&mut sim.queue_series).reserve(samples.saturating_mul(n_queues));
        Ok(sim)
    }

    /// Opens `<dir>/<host>.pcap` for every host in `[run] pcap`; packets those hosts send or
    /// receive from now on are recorded there.
    pub fn capture_to(&mut self, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let mut paths = Vec::new();
        self.captures = (0..self.net.hosts.len()).map(|_| None).collect();
        for h in &self.cfg.run.pcap {
            let id = self.net.host_id(h).expect("validated host");
            let path = dir.join(format!("{h}.pcap"));
            self.captures[id] = Some(PcapWriter::create(&path)?);
            paths.push(path);
        }
        Ok(paths)
    }

    /// Flushes capture files (also done when the simulation is dropped).
    pub fn flush_captures(&mut self) -> std::io::Result<()> {
        for w in self.captures.iter_mut().flatten() {
            w.flush()?;
        }
        Ok(())
    }

    /// Records `pkt` in the capture of `host`, if that host is captured. A write error stops
    /// that capture rather than the run. Monaco's control packets are not TCP and are left
    /// out, so that a capture reads as the TCP conversation it is.
    fn capture(&mut self, host: u32, now: Instant, pkt: &SimPacket, seg: &pathtwin_tcp::Segment) {
        if seg.control.is_some() {
            return;
        }
        if !matches!(self.captures.get(host as usize), Some(Some(_))) {
            return;
        }
        let (client_port, server_port) = pcap::ports(pkt.conn);
        let [client, server] = self.conns[pkt.conn as usize].addrs;
        let (src, dst, sp, dp) = if pkt.from_client { (client, server, client_port, server_port) } else { (server, client, server_port, client_port) };
        let slot = &mut self.captures[host as usize];
        let res = slot.as_mut().map(|w| w.record(now.as_nanos(), src, dst, sp, dp, seg, pkt.wire_len, pkt.mark.dscp()));
        if matches!(res, Some(Err(_))) {
            *slot = None;
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn network(&self) -> &Network<SimPacket> {
        &self.net
    }

    /// Current simulated time.
    pub fn now(&self) -> Instant {
        self.events.now()
    }

    /// The configured end of the run.
    pub fn end(&self) -> Instant {
        self.end
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Runs every event up to and including `until` (capped at the run's end); returns true
    /// when the run has reached its end.
    pub fn advance(&mut self, until: Instant) -> bool {
        // `end` moves back to now when `until_done` sees the last connection close.
        while let Some((now, ev)) = self.events.pop_due(until.min(self.end)) {
            self.dispatch(now, ev);
            if self.cfg.run.until_done && self.done_conns == self.conns.len() && now < self.end {
                self.end = now;
            }
        }
        let end = self.end;
        self.finished = self.events.peek_time().is_none_or(|t| t > end);
        self.finished
    }

    /// Runs to the end and returns the results.
    pub fn run(mut self) -> Results {
        self.advance(self.end);
        self.results()
    }

    fn dispatch(&mut self, now: Instant, ev: Event) {
        match ev {
            Event::Element(e) => self.on_element(now, e as usize),
            Event::Timer(c, side) => {
                let (c, side) = (c as usize, side as usize);
                if self.conns[c].timers[side] != Some(now) {
                    return;
                }
                self.conns[c].timers[side] = None;
                self.conns[c].endpoints[side].handle_timeout(now);
                self.service(now, c, side);
            }
            Event::App(c, step) => self.on_app(now, c as usize, step),
            Event::Sample => {
                self.sample(now);
                let next = now + self.sample_interval;
                if next <= self.end {
                    self.events.schedule(next, Event::Sample);
                }
            }
        }
    }

    fn on_element(&mut self, now: Instant, e: usize) {
        if self.element_wakeup[e] != now.as_nanos() {
            return;
        }
        self.element_wakeup[e] = NO_WAKEUP;
        self.release(now, e);
    }

    /// Forwards everything element `e` releases by `now`, then re-arms its wakeup.
    fn release(&mut self, now: Instant, e: usize) {
        while let Some((t, pkt)) = self.net.elements[e].poll_output(now) {
            self.forward(t, pkt);
        }
        self.schedule_element(e);
    }

    fn schedule_element(&mut self, e: usize) {
        if let Some(w) = self.net.elements[e].next_wakeup() {
            self.arm_element(e, w.max(self.events.now()));
        }
    }

    /// Makes sure element `e` is woken at `w` (an earlier pending wakeup will re-arm it).
    fn arm_element(&mut self, e: usize, w: Instant) {
        match self.element_wakeup[e] {
            s if s <= w.as_nanos() => {}
            _ => {
                self.element_wakeup[e] = w.as_nanos();
                self.events.schedule(w, Event::Element(e as u32));
            }
        }
    }

    /// Moves a packet that left hop `pkt.hop` at `t` to its next hop, or delivers it.
    fn forward(&mut self, t: Instant, mut pkt: SimPacket) {
        pkt.hop += 1;
        let next = self.hops(&pkt).get(pkt.hop as usize).copied();
        match next {
            Some(hop) => {
                if let Some(dropped) = self.net.elements[hop.element].push(t, pkt, hop.slot) {
                    self.segments.release(&dropped);
                }
                self.after_push(t, hop.element);
            }
            None => {
                let c = pkt.conn as usize;
                let side = if pkt.from_client { SERVER } else { CLIENT };
                if self.captures.is_empty() {
                    // Read in place: a copy of the segment was a tenth of `release`.
                    let seg = self.segments.take(&pkt);
                    self.conns[c].endpoints[side].handle_segment(t, seg);
                } else {
                    let seg = *self.segments.take(&pkt);
                    self.capture(pkt.dst, t, &pkt, &seg);
                    self.conns[c].endpoints[side].handle_segment(t, &seg);
                }
                self.service(t, c, side);
            }
        }
    }

    /// The hops `pkt` crosses: its connection's pipe (client to server is the pipe's up
    /// direction), or the route between its hosts.
    fn hops(&self, pkt: &SimPacket) -> &[Hop] {
        let span = self.conn_routes[pkt.conn as usize][usize::from(!pkt.from_client)];
        &self.route_hops[span.start as usize..(span.start + span.len) as usize]
    }

    /// Sends a segment from a connection's `side` into the first hop of its route.
    fn transmit(&mut self, now: Instant, c: usize, side: usize, seg: pathtwin_tcp::Segment) {
        let conn = &self.conns[c];
        let (src, dst) = (conn.hosts[side], conn.hosts[1 - side]);
        let pkt = self.segments.packet(src, dst, c as u32, side == CLIENT, seg);
        if !self.captures.is_empty() {
            self.capture(src, now, &pkt, &seg);
        }
        let first = *self.hops(&pkt).first().expect("routes checked at build");
        if let Some(dropped) = self.net.elements[first.element].push(now, pkt, first.slot) {
            self.segments.release(&dropped);
        }
        self.after_push(now, first.element);
    }

    /// After a push: a zero-delay element (loss) releases at once, without an event.
    fn after_push(&mut self, now: Instant, e: usize) {
        match self.net.elements[e].next_wakeup() {
            Some(w) if w <= now && self.element_wakeup[e] != now.as_nanos() => self.release(now, e),
            Some(w) => self.arm_element(e, w.max(now)),
            None => {}
        }
    }

    /// After any input to an endpoint: let the application react, send what TCP wants to
    /// send, and re-arm its timer.
    fn service(&mut self, now: Instant, c: usize, side: usize) {
        while let Some(ev) = self.conns[c].endpoints[side].poll_event() {
            self.on_tcp_event(now, c, side, ev);
        }
        self.top_up(c);
        while let Some(seg) = self.conns[c].endpoints[side].poll_transmit(now) {
            self.transmit(now, c, side, seg);
        }
        let conn = &mut self.conns[c];
        if let Some(t) = conn.endpoints[side].poll_timeout() {
            let t = t.max(now);
            match conn.timers[side] {
                Some(s) if s <= t && s >= now => {}
                _ => {
                    conn.timers[side] = Some(t);
                    self.events.schedule(t, Event::Timer(c as u32, side as u8));
                }
            }
        }
    }

    fn top_up(&mut self, c: usize) {
        let conn = &mut self.conns[c];
        let ep = &conn.endpoints[CLIENT];
        let more = conn.app.top_up(ep.stats().bytes_acked, ep.cwnd());
        if more > 0 {
            conn.endpoints[CLIENT].send(more);
            if let App::Bulk { limit: Some(l), written, .. } = conn.app {
                if written >= l {
                    conn.endpoints[CLIENT].close();
                }
            }
        }
    }

    fn on_tcp_event(&mut self, now: Instant, c: usize, side: usize, ev: TcpEvent) {
        if matches!(ev, TcpEvent::Closed | TcpEvent::Reset) {
            self.note_closed(now, c, side, matches!(ev, TcpEvent::Reset));
        }
        if matches!(self.conns[c].app, App::Replay(_)) {
            self.on_replay_tcp_event(now, c, side, ev);
            return;
        }
        let conn = &mut self.conns[c];
        match ev {
            TcpEvent::Connected if side == CLIENT => match &mut conn.app {
                App::Bulk { writing, .. } | App::OnOff { writing, .. } => *writing = true,
                App::ReqResp(r) => {
                    r.request_sent_at = now;
                    let req = r.request;
                    conn.endpoints[CLIENT].send(req);
                }
                // Handled before (on_replay_tcp_event).
                App::Replay(_) => {}
            },
            TcpEvent::Received { .. } => {
                let delivered = conn.endpoints[side].stats().bytes_delivered;
                match &mut conn.app {
                    App::Bulk { limit: Some(l), .. } if side == SERVER && delivered >= *l && conn.completed_at.is_none() => {
                        conn.completed_at = Some(now);
                    }
                    App::ReqResp(r) if side == SERVER => {
                        while delivered >= (r.requests_read + 1) * r.request {
                            r.requests_read += 1;
                            let at = now + r.server_delay;
                            self.events.schedule(at, Event::App(c as u32, AppStep::Respond));
                        }
                    }
                    App::ReqResp(r) if side == CLIENT => {
                        while delivered >= (r.responses_read + 1) * r.response {
                            r.responses_read += 1;
                            r.response_times.push((now - r.request_sent_at).as_secs_f64());
                            let more = match &mut r.remaining {
                                None => true,
                                Some(0) => false,
                                Some(n) => {
                                    *n -= 1;
                                    true
                                }
                            };
                            let stopped = conn.stop.is_some_and(|s| now >= s);
                            if more && !stopped {
                                let at = now + r.think;
                                self.events.schedule(at, Event::App(c as u32, AppStep::NextRequest));
                            } else {
                                conn.endpoints[CLIENT].close();
                            }
                        }
                    }
                    _ => {}
                }
            }
            TcpEvent::PeerClosed if side == SERVER => conn.endpoints[SERVER].close(),
            _ => {}
        }
    }

    /// Side `side` of connection `c` has closed; a reset ends both. Counts the connection
    /// done (and a replay completed) when both ends have.
    fn note_closed(&mut self, now: Instant, c: usize, side: usize, reset: bool) {
        let conn = &mut self.conns[c];
        let was_done = conn.closed == [true; 2];
        conn.closed[side] = true;
        if reset {
            conn.closed = [true; 2];
        }
        if !was_done && conn.closed == [true; 2] {
            self.done_conns += 1;
            if matches!(conn.app, App::Replay(_)) {
                conn.completed_at = Some(now);
            }
        }
    }

    fn on_replay_tcp_event(&mut self, now: Instant, c: usize, side: usize, ev: TcpEvent) {
        let mut steps = std::mem::take(&mut self.replay_steps);
        let conn = &mut self.conns[c];
        let delivered = conn.endpoints[side].stats().bytes_delivered;
        if let App::Replay(r) = &mut conn.app {
            match ev {
                TcpEvent::Connected => r.on_connected(now, side, delivered, &mut steps),
                TcpEvent::Received { .. } => r.on_received(now, side, delivered, &mut steps),
                TcpEvent::PeerClosed => r.on_peer_closed(side, &mut steps),
                _ => {}
            }
        }
        self.apply_replay_steps(c, &mut steps);
        self.replay_steps = steps;
    }

    /// A replay's scheduled step is due: let it write, then send what TCP can.
    fn on_replay_step(&mut self, now: Instant, c: usize, step: AppStep) {
        let side = Replay::side_of(step);
        let mut steps = std::mem::take(&mut self.replay_steps);
        let conn = &mut self.conns[c];
        let delivered = conn.endpoints[side].stats().bytes_delivered;
        if let App::Replay(r) = &mut conn.app {
            r.on_step(now, step, delivered, &mut steps);
        }
        self.apply_replay_steps(c, &mut steps);
        self.replay_steps = steps;
        self.service(now, c, side);
    }

    /// Carries out the replay's steps. Each comes from an event of the side it acts on, so
    /// the `service` call under way (or the one after a step) sends what it wrote.
    fn apply_replay_steps(&mut self, c: usize, steps: &mut Vec<Step>) {
        for s in steps.drain(..) {
            match s {
                Step::Write { side, bytes } => self.conns[c].endpoints[side].send(bytes),
                Step::Close { side } => self.conns[c].endpoints[side].close(),
                Step::At(t, step) => self.events.schedule(t, Event::App(c as u32, step)),
            }
        }
    }

    fn on_app(&mut self, now: Instant, c: usize, step: AppStep) {
        if matches!(self.conns[c].app, App::Replay(_)) && matches!(step, AppStep::NextRequest | AppStep::Respond | AppStep::RespondRest) {
            self.on_replay_step(now, c, step);
            return;
        }
        let conn = &mut self.conns[c];
        match step {
            AppStep::Start => {
                conn.started = true;
                if let App::OnOff { on, .. } = conn.app {
                    self.events.schedule(now + on, Event::App(c as u32, AppStep::Toggle));
                }
                self.service(now, c, CLIENT);
            }
            AppStep::Stop => {
                conn.delivered_at_stop = Some(conn.delivered());
                match &mut conn.app {
                    App::Bulk { writing, .. } | App::OnOff { writing, .. } => {
                        *writing = false;
                        conn.endpoints[CLIENT].close();
                    }
                    App::ReqResp(r) => r.remaining = Some(0),
                    // Validation keeps `stop` away from replays.
                    App::Replay(_) => {}
                }
                self.service(now, c, CLIENT);
            }
            AppStep::Toggle => {
                let stopped = conn.stop.is_some_and(|s| now >= s);
                if let App::OnOff { on, off, writing, .. } = &mut conn.app {
                    if stopped {
                        return;
                    }
                    *writing = !*writing;
                    let next = if *writing { *on } else { *off };
                    self.events.schedule(now + next, Event::App(c as u32, AppStep::Toggle));
                }
                self.service(now, c, CLIENT);
            }
            AppStep::NextRequest => {
                if let App::ReqResp(r) = &mut conn.app {
                    r.request_sent_at = now;
                    let req = r.request;
                    conn.endpoints[CLIENT].send(req);
                }
                self.service(now, c, CLIENT);
            }
            AppStep::RespondRest => {}
            AppStep::Respond => {
                if let App::ReqResp(r) = &conn.app {
                    let resp = r.response;
                    conn.endpoints[SERVER].send(resp);
                }
                self.service(now, c, SERVER);
            }
        }
    }

    fn sample(&mut self, now: Instant) {
        let t = now.as_secs_f64();
        let interval = self.sample_interval.as_secs_f64();
        let flow_series = Arc::make_mut(&mut self.flow_series);
        for (i, conn) in self.conns.iter_mut().enumerate() {
            if !conn.started {
                continue;
            }
            let delivered = conn.delivered();
            let ep = &conn.endpoints[CLIENT];
            let goodput = (delivered - conn.delivered_at_last_sample) as f64 * 8.0 / interval;
            conn.delivered_at_last_sample = delivered;
            flow_series.push(vec![
                Cell::F(t),
                Cell::I(i as i64),
                Cell::T(&conn.label),
                Cell::I(ep.cwnd() as i64),
                Cell::I(ep.ssthresh().min(i64::MAX as u64) as i64),
                Cell::F(ep.srtt().map_or(f64::NAN, |d| d.as_millis_f64())),
                Cell::F(goodput),
                Cell::I(delivered as i64),
                Cell::I(ep.stats().retransmits as i64),
            ]);
        }
        for e in self.net.queue_ids().collect::<Vec<_>>() {
            let Element::Queue(q) = &mut self.net.elements[e] else { continue };
            q.advance(now);
            let occ = q.occupancy();
            let drops = q.stats().drops;
            let d_drops = drops - self.drops_at_last_sample[e];
            self.drops_at_last_sample[e] = drops;
            Arc::make_mut(&mut self.queue_series).push(vec![
                Cell::F(t),
                Cell::T(&self.net.element_info[e].name),
                Cell::I(occ.packets as i64),
                Cell::I(occ.bytes as i64),
                Cell::I(occ.placeholder_packets as i64),
                Cell::I(occ.placeholder_bytes as i64),
                Cell::I(d_drops as i64),
                Cell::I(q.stats().departure_bytes as i64),
                Cell::F(q.abw().as_f64()),
                Cell::I(q.active_flows().map_or(0, |a| a.iter().sum::<u32>()) as i64),
                // RED's average queue (in its thresholds' unit); NaN for disciplines without one.
                Cell::F(q.qdisc_average().unwrap_or(f64::NAN)),
            ]);
            // Advancing may have moved departures into the output buffer.
            self.schedule_element(e);
        }
    }

    /// The `markers` table: what each marker decided. IN is green and OUT is yellow plus
    /// red; a two-colour policy (token bucket, TCP-friendly) has no yellow.
    fn marker_table(&self) -> Table {
        let mut t = Table::with_schema(&[
            ("marker", "str"),
            ("kind", "str"),
            ("in_packets", "i64"),
            ("in_bytes", "i64"),
            ("out_packets", "i64"),
            ("out_bytes", "i64"),
            ("green_packets", "i64"),
            ("green_bytes", "i64"),
            ("yellow_packets", "i64"),
            ("yellow_bytes", "i64"),
            ("red_packets", "i64"),
            ("red_bytes", "i64"),
            ("protected_packets", "i64"),
        ]);
        for e in self.net.marker_ids() {
            let m = self.net.elements[e].as_marker().expect("marker id");
            let s = m.stats();
            t.push(vec![
                Cell::S(self.net.element_info[e].name.clone()),
                Cell::S(m.kind().to_string()),
                Cell::I(s.in_packets() as i64),
                Cell::I(s.in_bytes() as i64),
                Cell::I(s.out_packets() as i64),
                Cell::I(s.out_bytes() as i64),
                Cell::I(s.green_packets as i64),
                Cell::I(s.green_bytes as i64),
                Cell::I(s.yellow_packets as i64),
                Cell::I(s.yellow_bytes as i64),
                Cell::I(s.red_packets as i64),
                Cell::I(s.red_bytes as i64),
                Cell::I(s.protected_packets as i64),
            ]);
        }
        t
    }

    /// The `pipes` table: where each `[[pipe]]`'s connections come from, so that a capture
    /// can be read pipe by pipe (the replay matches connection i by pipe i's address).
    fn pipe_table(&self) -> Table {
        let mut t = Table::with_schema(&[("pipe", "i64"), ("client", "str"), ("server", "str"), ("address", "str")]);
        for (g, p) in self.net.pipes.iter().enumerate() {
            t.push(vec![
                Cell::I(g as i64),
                Cell::S(self.net.hosts[p.client].clone()),
                Cell::S(self.net.hosts[p.server].clone()),
                Cell::S(pcap::addr_text(pcap::pipe_addr(g as u32))),
            ]);
        }
        t
    }

    /// The tables as of now; callable at any time (an interrupted run keeps what it measured).
    pub fn results(&self) -> Results {
        let now = self.events.now().min(self.end);
        let mut flows = Table::with_schema(&[
            ("flow", "i64"),
            ("label", "str"),
            ("entry", "i64"),
            ("copy", "i64"),
            ("src", "str"),
            ("dst", "str"),
            ("app", "str"),
            ("cc", "str"),
            ("start_s", "f64"),
            ("end_s", "f64"),
            ("bytes_delivered", "i64"),
            ("goodput_bps", "f64"),
            ("bytes_sent", "i64"),
            ("segments_sent", "i64"),
            ("retransmits", "i64"),
            ("fast_retransmits", "i64"),
            ("timeouts", "i64"),
            ("lost_retransmissions", "i64"),
            ("tail_loss_probes", "i64"),
            ("ecn_reductions", "i64"),
            ("ce_received", "i64"),
            ("rtt_min_ms", "f64"),
            ("rtt_mean_ms", "f64"),
            ("completion_s", "f64"),
            ("responses", "i64"),
            ("response_time_mean_s", "f64"),
        ]);
        for (i, conn) in self.conns.iter().enumerate() {
            let f = &self.cfg.flows[conn.flow_entry];
            let ep = conn.endpoints[CLIENT].stats();
            let end = conn.stop.map_or(now, |s| s.min(now));
            let delivered = conn.delivered_at_stop.unwrap_or_else(|| conn.delivered());
            let active = end.saturating_since(conn.start).as_secs_f64();
            let goodput = if active > 0.0 { delivered as f64 * 8.0 / active } else { 0.0 };
            let (responses, resp_mean) = match &conn.app {
                App::ReqResp(r) if !r.response_times.is_empty() => {
                    (r.response_times.len() as i64, r.response_times.iter().sum::<f64>() / r.response_times.len() as f64)
                }
                App::Replay(r) if !r.response_times.is_empty() => {
                    (r.response_times.len() as i64, r.response_times.iter().sum::<f64>() / r.response_times.len() as f64)
                }
                _ => (0, f64::NAN),
            };
            let rtt_mean = if ep.rtt_count > 0 { ep.rtt_sum.as_millis_f64() / ep.rtt_count as f64 } else { f64::NAN };
            flows.push(vec![
                Cell::I(i as i64),
                Cell::S(conn.label.clone()),
                Cell::I(conn.flow_entry as i64),
                Cell::I(conn.copy as i64),
                Cell::S(f.from.clone()),
                Cell::S(f.to.clone()),
                Cell::S(format!("{:?}", f.app).to_lowercase()),
                Cell::S(conn.cc.to_string()),
                Cell::F(conn.start.as_secs_f64()),
                Cell::F(end.as_secs_f64()),
                Cell::I(delivered as i64),
                Cell::F(goodput),
                Cell::I(ep.bytes_sent as i64),
                Cell::I(ep.segments_sent as i64),
                Cell::I(ep.retransmits as i64),
                Cell::I(ep.fast_retransmits as i64),
                Cell::I(ep.timeouts as i64),
                Cell::I(ep.lost_retransmissions as i64),
                Cell::I(ep.tail_loss_probes as i64),
                Cell::I(ep.ecn_reductions as i64),
                // CE marks on the flow's data, counted where they arrive: at the receiver.
                Cell::I(conn.endpoints[SERVER].stats().ce_received as i64),
                Cell::F(ep.rtt_min.map_or(f64::NAN, |d| d.as_millis_f64())),
                Cell::F(rtt_mean),
                Cell::F(conn.completed_at.map_or(f64::NAN, |t| (t - conn.start).as_secs_f64())),
                Cell::I(responses),
                Cell::F(resp_mean),
            ]);
        }
        let mut queues = Table::with_schema(&[
            ("queue", "str"),
            ("qdisc", "str"),
            ("capacity_bps", "f64"),
            ("abw_bps", "f64"),
            ("limit", "str"),
            ("arrivals", "i64"),
            ("departures", "i64"),
            ("drops", "i64"),
            ("arrival_bytes", "i64"),
            ("departure_bytes", "i64"),
            ("final_packets", "i64"),
            ("placeholder_arrivals", "i64"),
            ("placeholder_departures", "i64"),
            ("placeholder_drops", "i64"),
            ("placeholder_share", "f64"),
            ("utilization", "f64"),
            ("early_drops", "i64"),
            ("forced_drops", "i64"),
            ("ecn_marks", "i64"),
            // Per drop precedence (RIO/FRIO's IN and OUT; unmarked traffic is IN), real
            // packets at an active queue manager; zeros for other disciplines.
            ("in_arrivals", "i64"),
            ("out_arrivals", "i64"),
            ("in_drops", "i64"),
            ("out_drops", "i64"),
        ]);
        for e in self.net.queue_ids() {
            let q = self.net.elements[e].as_queue().expect("queue id");
            let s = q.stats();
            let capacity_bytes = Rate::bytes_in(q.capacity(), now - Instant::ZERO) as f64;
            // Without an active queue manager every drop is a tail drop.
            let aqm = q.aqm_stats().unwrap_or(AqmStats { forced_drops: s.drops, ..Default::default() });
            queues.push(vec![
                Cell::S(self.net.element_info[e].name.clone()),
                Cell::S(q.qdisc_name().to_string()),
                Cell::F(q.capacity().as_f64()),
                Cell::F(q.abw().as_f64()),
                Cell::S(q.limit().to_string()),
                Cell::I(s.arrivals as i64),
                Cell::I(s.departures as i64),
                Cell::I(s.drops as i64),
                Cell::I(s.arrival_bytes as i64),
                Cell::I(s.departure_bytes as i64),
                Cell::I(q.occupancy().packets as i64),
                Cell::I(s.placeholder_arrivals as i64),
                Cell::I(s.placeholder_departures as i64),
                Cell::I(s.placeholder_drops as i64),
                Cell::F(q.placeholder_share()),
                Cell::F(if capacity_bytes > 0.0 { s.departure_bytes as f64 / capacity_bytes } else { 0.0 }),
                Cell::I(aqm.early_drops as i64),
                Cell::I(aqm.forced_drops as i64),
                Cell::I(aqm.ecn_marks as i64),
                Cell::I(aqm.in_class.arrivals as i64),
                Cell::I(aqm.out_class.arrivals as i64),
                Cell::I(aqm.in_class.drops() as i64),
                Cell::I(aqm.out_class.drops() as i64),
            ]);
        }
        Results {
            flows,
            flow_series: Arc::clone(&self.flow_series),
            queues,
            queue_series: Arc::clone(&self.queue_series),
            markers: self.marker_table(),
            pipes: self.pipe_table(),
            simulated_s: now.as_secs_f64(),
            events: self.events.processed(),
            complete: self.is_finished(),
        }
    }
}
