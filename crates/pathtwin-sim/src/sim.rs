//! The simulation: connections, the event loop, and metric collection.
//!
//! The network is the shared model, moved by `pathtwin-core`'s [`Driver`]: the simulator
//! keeps only its clock (the [`EventQueue`], on which the driver's wake-ups are events) and
//! its "I/O", the simulated hosts ([`Hosts`]: TCP endpoints, applications, captures), to
//! which the driver delivers packets and from which endpoints send.
//!
//! A flow runs over the route between its hosts or, with `pipe = N`, over `[[pipe]]` N
//! (Monkey Do's per-connection path, one per replayed connection) from that pipe's own
//! client address ([`pcap::pipe_addr`]); the `pipes` results table lists those addresses.
//! Connection `c`'s packets follow driver route `2c` from the client and `2c + 1` back;
//! `[[probe]]` series ([`crate::probes`]) are numbered after the connections and travel the
//! same way.
//! With `[run] until_done` the run ends once every connection has closed at both ends.
//!
//! The applications are [`pathtwin_core::app`]'s, the emulator's too: the hosts tell a
//! connection's application what its endpoints did and turn its actions into endpoint calls
//! (`send`, `close`) and events ([`Event::App`]), in the order it gives them. What is the
//! simulator's own is how a streaming client writes ([`write_ahead`]) and what it measures:
//! the goodput window up to `stop`, a replay's completion (both ends closed), connections done.

use crate::event::{Event, EventQueue};
use crate::packet::{SegmentSlab, SimPacket};
use crate::pcap::{self, PcapWriter};
use crate::probes::Probes;
use crate::tcp_settings::check_tables_used;
use pathtwin_core::app::{Action, App, Step, MIN_WRITE_AHEAD};
use pathtwin_core::replay::{CLIENT, SERVER};
use pathtwin_core::config::{connection_labels, Config, ConfigError, FlowConfig};
use pathtwin_core::driver::{Driver, Engine, RouteId};
use pathtwin_core::results::{self, FLOWS, FLOW_SERIES, PIPES, QUEUE_SERIES};
use pathtwin_core::table::{Cell, Table};
use pathtwin_core::time::{Duration, Instant};
use pathtwin_core::topology::{self, Hop, Network, RouteScope};
use pathtwin_tcp::{Endpoint, Event as TcpEvent, TcpConfig};
use rand::Rng as _;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

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
    /// When both ends had closed (a replay's completion).
    closed_at: Option<Instant>,
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
            + if self.app.counts_server_only() { 0 } else { self.endpoints[CLIENT].stats().bytes_delivered }
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
    /// One row per `[[probe]]` datagram sent.
    pub probes: Table,
    /// Simulated seconds covered.
    pub simulated_s: f64,
    /// Events processed.
    pub events: u64,
    /// Whether the run reached its configured duration.
    pub complete: bool,
}

/// See [`Simulation::tcp_defaults`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpDefaults {
    pub payload: u32,
    pub ip_bytes: u32,
    pub max_window: u64,
}

/// The most rows a time-series table is given room for before the run: 4 Mi rows, 32 MiB
/// a column (the largest benchmark, 10 000 flows for 2 s, needs 210 000).
const MAX_RESERVED_ROWS: usize = 1 << 22;

pub struct Simulation {
    cfg: Config,
    /// The network, moved by the one driver both engines run.
    driver: Driver<SimPacket>,
    /// The clock and the hosts: what the driver is plugged into.
    hosts: Hosts,
    end: Instant,
    sample_interval: Duration,
    /// Shared with the [`Results`] taken so far; a sample after that copies them first.
    flow_series: Arc<Table>,
    queue_series: Arc<Table>,
    /// Whether no event is left before the end (updated by `advance`).
    finished: bool,
}

/// The simulator's side of the [`Driver`]: the event queue that is its clock, and the
/// simulated hosts (TCP connections and their applications, captures), which packets reach
/// and leave the network from.
struct Hosts {
    events: EventQueue,
    conns: Vec<Connection>,
    segments: SegmentSlab,
    /// Capture writers by host index (hosts listed in `[run] pcap`).
    captures: Vec<Option<PcapWriter>>,
    /// Connections closed at both ends.
    done_conns: usize,
    /// Scratch list of an application's actions.
    actions: Vec<Action>,
    /// The `[[probe]]` series.
    probes: Probes,
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
            let flows = cfg.flows.iter().filter(|f| f.pipe.is_none()).filter_map(ends);
            let probes = cfg.probes.iter().filter_map(|p| id.get(p.from.as_str()).zip(id.get(p.to.as_str())).map(|(&a, &b)| (a, b)));
            flows.chain(probes).flat_map(|(a, b)| [(a, b), (b, a)]).collect()
        };
        let mut net: Network<SimPacket> = topology::compile_scoped(&cfg, RouteScope::Pairs(&pairs))?;
        let mut events = EventQueue::new();
        let mut conns = Vec::new();
        // Per `[[flow]]` entry, the hops of its connections' two routes: its pipe's, or its
        // hosts' route.
        let mut entry_hops: Vec<[Vec<Hop>; 2]> = Vec::with_capacity(cfg.flows.len());
        let mut isn_rng = pathtwin_core::rng_for(cfg.run.seed, u64::MAX);
        TcpConfig::check_tables(&cfg.tcp, "tcp")?;
        let mut controllers_used: Vec<&'static str> = Vec::new();
        let labels = connection_labels(&cfg.flows);
        for (i, f) in cfg.flows.iter().enumerate() {
            let (a, b) = (net.host_id(&f.from).expect("validated"), net.host_id(&f.to).expect("validated"));
            // Validation checked that a pipe flow's hosts are its pipe's ends.
            let hops: [Vec<Hop>; 2] = match f.pipe {
                Some(p) => {
                    let r = &net.pipes[p as usize];
                    [r.up.clone(), r.down.clone()]
                }
                None => match (net.route(a, b), net.route(b, a)) {
                    (Some(up), Some(down)) => [up.to_vec(), down.to_vec()],
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
            // The endpoints assume the rest of the endpoint's own checks (a window of zero
            // segments, a zero RTO): the merged settings of `[tcp]` and the flow's `tcp`.
            tcp.validate().map_err(|e| ConfigError::invalid(format!("flow[{i}]"), e.to_string()))?;
            for copy in 0..f.count {
                let id = conns.len() as u32;
                let start = Instant::ZERO + f.start;
                let label = labels[i][copy as usize].clone();
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
                    app: App::new(f),
                    start,
                    stop: f.stop.map(|s| Instant::ZERO + s),
                    cc: tcp.cc.name(),
                    delivered_at_stop: None,
                    closed_at: None,
                    delivered_at_last_sample: 0,
                    started: false,
                    closed: [false; 2],
                });
                events.schedule(start, Event::Start(id));
                if let Some(s) = f.stop {
                    events.schedule(Instant::ZERO + s, Event::App(id, Step::Stop));
                }
            }
            entry_hops.push(hops);
        }
        check_tables_used(&cfg.tcp, &controllers_used, "tcp")?;
        events.schedule(Instant::ZERO, Event::Sample);
        // Validation keeps the interval positive; a hint need not rely on it.
        let samples = cfg.run.duration.as_nanos().checked_div(cfg.run.sample_interval.as_nanos()).map_or(0, |n| n as usize + 1);
        let (n_conns, n_queues) = (conns.len(), net.queue_ids().count());
        let mut driver = Driver::new(net);
        // Route 2c is connection c's way from its client, 2c + 1 its way back (what
        // `SimPacket::route` says); the copies of a flow entry share the hops of its first
        // copy's routes.
        let mut first_copy_routes: Vec<Option<[RouteId; 2]>> = vec![None; entry_hops.len()];
        for (c, conn) in conns.iter().enumerate() {
            let ids = match first_copy_routes[conn.flow_entry] {
                Some([up, down]) => [driver.repeat_route(up), driver.repeat_route(down)],
                None => {
                    let [up, down] = &entry_hops[conn.flow_entry];
                    let ids = [driver.add_route(up), driver.add_route(down)];
                    first_copy_routes[conn.flow_entry] = Some(ids);
                    ids
                }
            };
            debug_assert_eq!(ids, [2 * c as u32, 2 * c as u32 + 1]);
        }
        // The probe series follow the connections: series p is "connection" n_conns + p.
        let end = Instant::ZERO + cfg.run.duration;
        let (probes, first_probes) = Probes::new(&cfg.probes, |h| driver.net.host_id(h).expect("validated") as u32, n_conns as u32, end);
        for (p, probe) in cfg.probes.iter().enumerate() {
            let (a, b) = (driver.net.host_id(&probe.from).expect("validated"), driver.net.host_id(&probe.to).expect("validated"));
            let (up, down) = match (driver.net.route(a, b), driver.net.route(b, a)) {
                (Some(up), Some(down)) => (up.to_vec(), down.to_vec()),
                _ => return Err(ConfigError::invalid(format!("probe[{p}]"), format!("no route between {} and {}", probe.from, probe.to)).into()),
            };
            let ids = [driver.add_route(&up), driver.add_route(&down)];
            debug_assert_eq!(ids, [2 * (n_conns + p) as u32, 2 * (n_conns + p) as u32 + 1]);
            if let Some(t) = first_probes[p] {
                events.schedule(t, Event::Probe(p as u32));
            }
        }
        let mut sim = Simulation {
            end,
            sample_interval: cfg.run.sample_interval,
            cfg,
            driver,
            hosts: Hosts { events, conns, segments: SegmentSlab::default(), captures: Vec::new(), done_conns: 0, actions: Vec::new(), probes },
            flow_series: Arc::new(Table::new(FLOW_SERIES)),
            queue_series: Arc::new(Table::new(QUEUE_SERIES)),
            finished: false,
        };
        // A row per started flow and per queue at every sample, up to a ceiling: a run of
        // hours at a fine interval would ask up front for gigabytes it may never fill (a run
        // that ends when its flows do), and beyond it the tables grow as they go.
        Arc::make_mut(&mut sim.flow_series).reserve(samples.saturating_mul(n_conns).min(MAX_RESERVED_ROWS));
        Arc::make_mut(&mut sim.queue_series).reserve(samples.saturating_mul(n_queues).min(MAX_RESERVED_ROWS));
        Ok(sim)
    }

    /// Opens `<dir>/<host>.pcap` for every host in `[run] pcap`; packets those hosts send or
    /// receive from now on are recorded there.
    pub fn capture_to(&mut self, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let mut paths = Vec::new();
        let net = &self.driver.net;
        self.hosts.captures = (0..net.hosts.len()).map(|_| None).collect();
        for h in &self.cfg.run.pcap {
            let id = net.host_id(h).expect("validated host");
            let path = dir.join(format!("{h}.pcap"));
            self.hosts.captures[id] = Some(PcapWriter::create(&path)?);
            paths.push(path);
        }
        Ok(paths)
    }

    /// Flushes capture files (also done when the simulation is dropped).
    pub fn flush_captures(&mut self) -> std::io::Result<()> {
        for w in self.hosts.captures.iter_mut().flatten() {
            w.flush()?;
        }
        Ok(())
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// What a connection with the `[tcp]` defaults sends: the payload and IP bytes of a
    /// full-sized data segment (what turns a goodput into the IP-level rate a path's ABW is)
    /// and its largest window.
    pub fn tcp_defaults(&self) -> TcpDefaults {
        // `new` checked these settings (`[tcp]` is every connection's base): they are valid.
        TcpConfig::from_settings(&self.cfg.tcp, "tcp").map_or(TcpDefaults { payload: 0, ip_bytes: 0, max_window: 0 }, |c| {
            let (payload, ip_bytes) = c.full_segment();
            TcpDefaults { payload, ip_bytes, max_window: c.max_window }
        })
    }

    pub fn network(&self) -> &Network<SimPacket> {
        &self.driver.net
    }

    /// Current simulated time.
    pub fn now(&self) -> Instant {
        self.hosts.events.now()
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
        while let Some((now, ev)) = self.hosts.events.pop_due(until.min(self.end)) {
            self.dispatch(now, ev);
            if self.cfg.run.until_done && self.hosts.done_conns == self.hosts.conns.len() && now < self.end {
                self.end = now;
            }
        }
        let end = self.end;
        self.finished = self.hosts.events.peek_time().is_none_or(|t| t > end);
        self.finished
    }

    /// Runs to the end and returns the results.
    pub fn run(mut self) -> Results {
        self.advance(self.end);
        self.results()
    }

    fn dispatch(&mut self, now: Instant, ev: Event) {
        let (net, hosts) = (&mut self.driver, &mut self.hosts);
        match ev {
            Event::Element(e) => net.wake(now, e as usize, hosts),
            Event::Timer(c, side) => {
                let (c, side) = (c as usize, side as usize);
                if hosts.conns[c].timers[side] != Some(now) {
                    return;
                }
                hosts.conns[c].timers[side] = None;
                hosts.conns[c].endpoints[side].handle_timeout(now);
                hosts.service(net, now, c, side);
            }
            Event::Start(c) => hosts.on_start(net, now, c as usize),
            Event::App(c, step) => hosts.on_app(net, now, c as usize, step),
            Event::Probe(p) => {
                let (pkt, next) = hosts.probes.send(p as usize, now);
                if let Some(next) = next {
                    hosts.events.schedule(next, Event::Probe(p));
                }
                net.send(now, pkt, hosts);
            }
            Event::Sample => {
                self.sample(now);
                let next = now + self.sample_interval;
                if next <= self.end {
                    self.hosts.events.schedule(next, Event::Sample);
                }
            }
        }
    }

    fn sample(&mut self, now: Instant) {
        let t = now.as_secs_f64();
        let interval = self.sample_interval.as_secs_f64();
        let flow_series = Arc::make_mut(&mut self.flow_series);
        for (i, conn) in self.hosts.conns.iter_mut().enumerate() {
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
        let queue_series = Arc::make_mut(&mut self.queue_series);
        self.driver.sample_queues(now, &mut self.hosts, |s, name| results::push_queue_sample(queue_series, s, name));
    }

    /// The `pipes` table: where each `[[pipe]]`'s connections come from, so that a capture
    /// can be read pipe by pipe (the replay matches connection i by pipe i's address).
    fn pipe_table(&self) -> Table {
        let net = &self.driver.net;
        let mut t = Table::new(PIPES);
        for g in 0..net.pipes.len() {
            let mut row = Vec::with_capacity(PIPES.len());
            results::push_pipe(&mut row, net, g, pcap::addr_text(pcap::pipe_addr(g as u32)));
            t.push(row);
        }
        t
    }

    /// The tables as of now; callable at any time (an interrupted run keeps what it measured).
    pub fn results(&self) -> Results {
        let now = self.hosts.events.now().min(self.end);
        let mut flows = Table::new(FLOWS);
        for (i, conn) in self.hosts.conns.iter().enumerate() {
            let f = &self.cfg.flows[conn.flow_entry];
            let ep = conn.endpoints[CLIENT].stats();
            let end = conn.stop.map_or(now, |s| s.min(now));
            let delivered = conn.delivered_at_stop.unwrap_or_else(|| conn.delivered());
            let times = conn.app.response_times();
            let (responses, resp_mean) = match times.len() {
                0 => (0, f64::NAN),
                n => (n as i64, times.iter().sum::<f64>() / n as f64),
            };
            let completed = if conn.app.is_replay() { conn.closed_at } else { conn.app.completed_at() };
            let goodput = results::goodput_bps(delivered, conn.start, end, completed);
            let rtt_mean = if ep.rtt_count > 0 { ep.rtt_sum.as_millis_f64() / ep.rtt_count as f64 } else { f64::NAN };
            flows.push(vec![
                Cell::I(i as i64),
                Cell::T(&conn.label),
                Cell::I(conn.flow_entry as i64),
                Cell::I(conn.copy as i64),
                Cell::T(&f.from),
                Cell::T(&f.to),
                Cell::T(f.app.name()),
                Cell::T(conn.cc),
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
                Cell::F(completed.map_or(f64::NAN, |t| (t - conn.start).as_secs_f64())),
                Cell::I(responses),
                Cell::F(resp_mean),
            ]);
        }
        Results {
            flows,
            flow_series: Arc::clone(&self.flow_series),
            queues: results::queues(&self.driver.net, now),
            queue_series: Arc::clone(&self.queue_series),
            markers: results::markers(&self.driver.net),
            pipes: self.pipe_table(),
            probes: self.hosts.probes.table(),
            simulated_s: now.as_secs_f64(),
            events: self.hosts.events.processed(),
            complete: self.is_finished(),
        }
    }
}

impl Engine<SimPacket> for Hosts {
    /// The event queue hands out events in time order, so pushes reach elements in order.
    const IN_ORDER: bool = true;

    fn wake_at(&mut self, element: usize, at: Instant) {
        self.events.schedule(at, Event::Element(element as u32));
    }

    /// A segment reaches its endpoint, which reacts (and may send) at once.
    fn deliver(&mut self, net: &mut Driver<SimPacket>, t: Instant, pkt: SimPacket) {
        if pkt.is_datagram() {
            if let Some(echo) = self.probes.arrived(&pkt, t) {
                net.send(t, echo, self);
            }
            return;
        }
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
        self.service(net, t, c, side);
    }

    fn recycle(&mut self, pkt: SimPacket) {
        self.segments.release(&pkt);
    }
}

impl Hosts {
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
        let conn = &self.conns[pkt.conn as usize];
        let [client, server] = conn.addrs;
        let (src, dst, sp, dp) = if pkt.from_client { (client, server, client_port, server_port) } else { (server, client, server_port, client_port) };
        // The window field is its sender's: scaled by its shift once it negotiated the option.
        let sender = &conn.endpoints[if pkt.from_client { CLIENT } else { SERVER }];
        let scale = pcap::WindowScale { shift: pcap::window_shift(sender.config().rcv_buffer), in_effect: sender.window_scale_enabled() };
        let slot = &mut self.captures[host as usize];
        let res = slot.as_mut().map(|w| w.record(now.as_nanos(), src, dst, sp, dp, seg, scale, pkt.wire_len, pkt.mark.dscp()));
        if matches!(res, Some(Err(_))) {
            *slot = None;
        }
    }

    /// Sends a segment from a connection's `side` into its route.
    fn transmit(&mut self, net: &mut Driver<SimPacket>, now: Instant, c: usize, side: usize, seg: pathtwin_tcp::Segment) {
        let conn = &self.conns[c];
        let (src, dst) = (conn.hosts[side], conn.hosts[1 - side]);
        let pkt = self.segments.packet(src, dst, c as u32, side == CLIENT, seg);
        if !self.captures.is_empty() {
            self.capture(src, now, &pkt, &seg);
        }
        net.send(now, pkt, self);
    }

    /// After any input to an endpoint: let the application react, send what TCP wants to
    /// send, and re-arm its timer.
    fn service(&mut self, net: &mut Driver<SimPacket>, now: Instant, c: usize, side: usize) {
        while let Some(ev) = self.conns[c].endpoints[side].poll_event() {
            self.on_tcp_event(now, c, side, ev);
        }
        self.top_up(c);
        while let Some(seg) = self.conns[c].endpoints[side].poll_transmit(now) {
            self.transmit(net, now, c, side, seg);
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

    /// Carries out an application's actions on connection `c`, in their order: writes and
    /// closes go to the endpoints (a `service` call sends what they allow), steps onto the
    /// event queue.
    fn apply(&mut self, c: usize, actions: &mut Vec<Action>) {
        for a in actions.drain(..) {
            match a {
                Action::Write { side, bytes } => self.conns[c].endpoints[side].send(bytes),
                Action::Close { side } => self.conns[c].endpoints[side].close(),
                Action::At(t, step) => self.events.schedule(t, Event::App(c as u32, step)),
            }
        }
    }

    /// Lets a streaming client write what [`write_ahead`] says, within its application's
    /// budget.
    fn top_up(&mut self, c: usize) {
        let conn = &mut self.conns[c];
        let budget = conn.app.stream_budget();
        if budget == 0 {
            return;
        }
        let ep = &conn.endpoints[CLIENT];
        let more = write_ahead(ep.stats().bytes_acked, ep.cwnd(), conn.app.stream_written()).min(budget);
        if more > 0 {
            conn.endpoints[CLIENT].send(more);
            let mut actions = std::mem::take(&mut self.actions);
            conn.app.streamed(more, &mut actions);
            self.apply(c, &mut actions);
            self.actions = actions;
        }
    }

    /// Tells connection `c`'s application what its endpoint at `side` reported.
    fn on_tcp_event(&mut self, now: Instant, c: usize, side: usize, ev: TcpEvent) {
        let mut actions = std::mem::take(&mut self.actions);
        let conn = &mut self.conns[c];
        let delivered = conn.endpoints[side].stats().bytes_delivered;
        match ev {
            TcpEvent::Connected => conn.app.on_connected(now, side, delivered, &mut actions),
            TcpEvent::Received { .. } => conn.app.on_received(now, side, delivered, &mut actions),
            TcpEvent::PeerClosed => conn.app.on_peer_closed(side, &mut actions),
            TcpEvent::Closed => self.note_closed(now, c, side, false),
            TcpEvent::Reset => self.note_closed(now, c, side, true),
            TcpEvent::AllAcked => {}
        }
        self.apply(c, &mut actions);
        self.actions = actions;
    }

    /// Side `side` of connection `c` has closed; a reset ends both. Counts the connection
    /// done (a replay completed) when both ends have.
    fn note_closed(&mut self, now: Instant, c: usize, side: usize, reset: bool) {
        let conn = &mut self.conns[c];
        let was_done = conn.closed == [true; 2];
        conn.closed[side] = true;
        if reset {
            conn.closed = [true; 2];
        }
        if !was_done && conn.closed == [true; 2] {
            self.done_conns += 1;
            conn.closed_at = Some(now);
        }
    }

    /// Connection `c`'s start: its application starts, and its client's SYN leaves (the
    /// `service` that follows).
    fn on_start(&mut self, net: &mut Driver<SimPacket>, now: Instant, c: usize) {
        let mut actions = std::mem::take(&mut self.actions);
        let conn = &mut self.conns[c];
        conn.started = true;
        conn.app.on_start(now, &mut actions);
        self.apply(c, &mut actions);
        self.actions = actions;
        self.service(net, now, c, CLIENT);
    }

    /// An application's step is due (or its `stop`): let it act, then let the side it read
    /// send what TCP can.
    fn on_app(&mut self, net: &mut Driver<SimPacket>, now: Instant, c: usize, step: Step) {
        let conn = &mut self.conns[c];
        if step == Step::Stop {
            conn.delivered_at_stop = Some(conn.delivered());
        }
        let side = step.side();
        let delivered = conn.endpoints[side].stats().bytes_delivered;
        let mut actions = std::mem::take(&mut self.actions);
        let live = conn.app.on_step(now, step, delivered, &mut actions);
        self.apply(c, &mut actions);
        self.actions = actions;
        if live {
            self.service(net, now, c, side);
        }
    }
}

/// The simulator's writing rule for a streaming client (bulk, on/off): how many more bytes
/// to write so that `written − acked` stays at least `2·max(cwnd, MIN_WRITE_AHEAD)`. The
/// writer is never application-limited, yet what it has written but TCP not yet sent stays
/// within about two windows, so that it stops promptly: at `stop` (or an `off` period) only
/// that still drains, as with iperf's time limit.
fn write_ahead(acked: u64, cwnd: u64, written: u64) -> u64 {
    (acked + 2 * cwnd.max(MIN_WRITE_AHEAD)).saturating_sub(written)
}
