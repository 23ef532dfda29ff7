//! One emulation from config to results: compiles the topology with `pathtwin-core`, creates
//! the hosts ([`Lab`]), runs the [`Engine`] on them, and reports live statistics (a serde
//! [`Snapshot`]) and final [`Results`]: the result tables, with the schemas of
//! `pathtwin_core::results` that the simulator's share, and what `run.json` says of the run
//! (`pathtwin-py` writes both).
//!
//! The `[tcp]` section maps onto the hosts' kernels: `cc` selects the kernel congestion
//! control (any name the kernel has, e.g. `cubic` or `bbr`, can also be given directly with
//! [`EmulatorOptions::cc`]), `sack` the `tcp_sack` sysctl, `initial_window`, `min_rto`, `mss`
//! and `delayed_ack = false` become route attributes (`initcwnd`, `rto_min`, `advmss`,
//! `quickack`) of both the IPv4 and the IPv6 route of every host (host names resolve to
//! IPv6 first), and `rcv_window`/`max_window` cap the socket buffers (`tcp_rmem`/`tcp_wmem`
//! maxima) and the advertised window itself (route attribute `window`, the kernel's window
//! clamp, which holds whatever buffer sizes an application asks for). `[[flow]]` entries are
//! run only when asked ([`EmulatorOptions::workload`]), by [`crate::workload`]'s programs over
//! the kernel's TCP (a flow's own `cc` and `tcp` as socket options), and give the `flows`
//! table; otherwise the hosts' own applications are the workload.

use std::net::IpAddr;

use pathtwin_core::config::{Config, ConfigError, MonarchConfig, MonarchTarget, TargetIpIds, TcpProfile};
use pathtwin_core::element::{Element, Occupancy, QueueStats};
use pathtwin_core::qdisc::AqmStats;
use pathtwin_core::results::{self, EMU_PIPES, PACKET_FLOWS, QUEUE_SERIES, ROUTES, TIMING};
use pathtwin_core::table::{Cell, Table};
use pathtwin_core::time::{Duration, Instant};
use pathtwin_core::topology::{self, ElementInfo, ResolvedDirection};
use serde::Serialize;

use crate::clock::CpuLatencyRequest;
use crate::device::Tun;
use crate::engine::{Engine, EngineError, HostCounters, MonarchProxy, ProbeWay, Route, RouteCounters, TimingOptions};
use crate::monarch::{MonarchStats, Translator};
use crate::real_target::RealTarget;
use crate::lab::{pipe_net, HostInfo, Lab, PipePlan, DEVICE};
use crate::lateness::Histogram;
use crate::flow_records::PacketFlowsRows;
use crate::long_tables::{LongTable, QueueSeriesRows, ResultTable};
use crate::netns::{cleanup_stale, NetnsError, RunId};
use crate::sampler::{push_flow_series_row, FlowSeriesRow, SamplingStats, TcpSampler};
use crate::workload::{self, Workload};

/// Everything that can stop an emulation from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The `[[flow]]` workload's programs could not start.
    #[error(transparent)]
    Workload(#[from] crate::workload::WorkloadError),
    /// The way to a real Monarch target could not be opened (no route, no raw sockets).
    #[error("monarch.target: {0}")]
    MonarchTarget(std::io::Error),
    /// The process lacks the privileges namespaces and TUN devices need.
    #[error("the emulator needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); run it with sudo")]
    NotRoot,
}

/// Knobs of the driver that are not part of the network model.
#[derive(Clone, Debug)]
pub struct EmulatorOptions {
    /// Use this run id instead of a fresh one.
    pub run_id: Option<RunId>,
    /// Kernel congestion control for every host, overriding `[tcp] cc`.
    pub cc: Option<String>,
    /// Spin instead of sleeping for deadlines closer than this.
    pub spin: Duration,
    /// Raise the loop thread's priority (see [`crate::priority`]).
    pub high_priority: bool,
    /// Keep idle CPUs polling while the emulation runs (see [`CpuLatencyRequest`]).
    pub cpu_latency_qos: bool,
    /// Sample every host's TCP sockets into `flow_series` (see [`crate::sampler`]).
    pub tcp_info: bool,
    /// With `[monarch]`: write the proxy's probes and answers to this pcap file.
    pub monarch_capture: Option<std::path::PathBuf>,
    /// Let hosts hand over and take back 64-KB TCP super-packets (see [`crate::gso`]); the
    /// model still sees every MTU-sized segment. Off: the hosts' kernels segment first, and
    /// captures on a host's device show wire-sized packets.
    pub offload: bool,
    /// Run the config's `[[flow]]` workload ([`crate::workload`]) from model time zero; its
    /// connections become the `flows` table.
    pub workload: bool,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        let timing = TimingOptions::default();
        EmulatorOptions {
            run_id: None,
            cc: None,
            spin: timing.spin,
            high_priority: timing.high_priority,
            cpu_latency_qos: true,
            tcp_info: true,
            monarch_capture: None,
            offload: true,
            workload: false,
        }
    }
}

/// A running emulation. Dropping it stops the loop and removes every host.
pub struct Emulator {
    // Field order is drop order: the workload's sockets close first (while the hosts still
    // exist), the devices (inside the engine) before the namespaces holding them are deleted.
    workload: Option<Workload>,
    engine: Engine<Tun>,
    // Its netlink sockets hold the namespaces; it stops (with a last sample) before they go.
    sampler: Option<TcpSampler>,
    lab: Lab,
    _cpu_latency: Option<CpuLatencyRequest>,
    element_info: Vec<ElementInfo>,
    resolved: Vec<ResolvedDirection>,
    warnings: Vec<String>,
    config: Config,
    /// Routes from here on are pipes', two per pipe (down, up) in `[[pipe]]` order.
    first_pipe_route: usize,
}

/// Whether an element belongs to a `[[pipe]]` (kept out of per-queue tables and series).
fn is_pipe(e: &ElementInfo) -> bool {
    e.kind.starts_with("pipe")
}

/// Live counters, cheap to take while running.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    pub run_id: String,
    pub t_s: f64,
    /// Routes between hosts (pipes are in `pipes`).
    pub routes: Vec<RouteSnapshot>,
    /// Monarch's proxy, when `[monarch]` is configured.
    pub monarch: Option<MonarchSnapshot>,
    pub pipes: PipeTotals,
    /// Bandwidth queues (pipes' queues are in the results' `pipes` table, [`EMU_PIPES`]).
    pub queues: Vec<QueueSnapshot>,
    /// One entry per `[[marker]]`, with the same counts as the simulator's `markers` table.
    pub markers: Vec<MarkerSnapshot>,
    pub hosts: Vec<HostSnapshot>,
    pub lateness: LatenessSummary,
    pub wake_lateness: LatenessSummary,
    /// Pushes moved up to their element's time (see `Engine::reordered_pushes`).
    pub reordered_pushes: u64,
    /// Whether the loop's thread ran at a raised priority, and how often it switched between
    /// `SCHED_FIFO` and the default policy (see [`crate::priority`]).
    pub high_priority: bool,
    pub priority_switches: u64,
}

/// Monarch's proxy: probes sent, answers, and what reached the receiver.
#[derive(Clone, Debug, Serialize)]
pub struct MonarchSnapshot {
    #[serde(flatten)]
    pub stats: MonarchStats,
    /// Packets held for an answer now.
    pub held: usize,
    pub released: u64,
    pub released_bytes: u64,
    /// Packets dropped because their probe would have exceeded a real target's rate cap,
    /// and probes the kernel refused to send (both 0 with an emulated target).
    pub capped: u64,
    pub send_failures: u64,
    /// A real target's probes' source address (this machine's, towards the target).
    pub source: Option<String>,
}

/// All pipes together (one entry per pipe would make every snapshot as large as the run).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PipeTotals {
    pub pipes: u64,
    pub packets_in: u64,
    pub packets_out: u64,
    pub write_drops: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RouteSnapshot {
    pub src: String,
    pub dst: String,
    pub elements: Vec<usize>,
    #[serde(flatten)]
    pub counters: RouteCounters,
}

#[derive(Clone, Debug, Serialize)]
pub struct QueueSnapshot {
    pub element: usize,
    pub name: String,
    pub capacity_bps: u64,
    pub abw_bps: u64,
    pub limit: String,
    /// What is in the queue now (the core's own accounting, flattened into the JSON).
    #[serde(flatten)]
    pub occupancy: Occupancy,
    /// The core's counters since the start, flattened into the JSON.
    #[serde(flatten)]
    pub stats: QueueStats,
    /// Placeholder share of the link's transmitted bytes.
    pub placeholder_share: f64,
    pub active_flows: Vec<u32>,
    /// The discipline's average queue (RED's, in its thresholds' unit), if it keeps one.
    pub avg_queue: Option<f64>,
    /// Early drops, forced drops and ECN marks of an active queue manager.
    pub aqm: Option<AqmStats>,
}

/// What one marker decided since the start: IN is green, OUT is yellow plus red (a
/// two-colour policy has no yellow); per-colour counts flattened into the JSON.
#[derive(Clone, Debug, Serialize)]
pub struct MarkerSnapshot {
    pub element: usize,
    pub name: String,
    pub kind: &'static str,
    pub in_packets: u64,
    pub in_bytes: u64,
    pub out_packets: u64,
    pub out_bytes: u64,
    #[serde(flatten)]
    pub stats: pathtwin_core::marker::MarkerStats,
}

impl MarkerSnapshot {
    fn new<P: pathtwin_core::packet::PacketMeta>(element: usize, name: String, m: &pathtwin_core::marker::Marker<P>) -> Self {
        let s = *m.stats();
        MarkerSnapshot {
            element,
            name,
            kind: m.kind(),
            in_packets: s.in_packets(),
            in_bytes: s.in_bytes(),
            out_packets: s.out_packets(),
            out_bytes: s.out_bytes(),
            stats: s,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct HostSnapshot {
    pub name: String,
    #[serde(flatten)]
    pub counters: HostCounters,
}

/// Quantiles of a lateness histogram, in nanoseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LatenessSummary {
    pub count: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl From<&Histogram> for LatenessSummary {
    fn from(h: &Histogram) -> Self {
        LatenessSummary {
            count: h.count(),
            mean_ns: h.mean(),
            p50_ns: h.quantile(0.5),
            p99_ns: h.quantile(0.99),
            p999_ns: h.quantile(0.999),
            max_ns: h.max(),
        }
    }
}

/// A finished emulation: its result tables and what `run.json` says of it.
pub struct Results<'a> {
    /// With the workload `flows`; then `queues`, `queue_series`, `markers`, `packet_flows`,
    /// `routes`, `timing`, with `[[pipe]]`s `pipes`, and with `tcp_info` sampling
    /// `flow_series` (every sending TCP socket of every host over time, see
    /// [`crate::sampler`]); schemas in `pathtwin_core::results`. The tables that grow with
    /// the run's length are [`ResultTable::Long`], read from their spill files a row group at
    /// a time.
    pub tables: Vec<(&'static str, ResultTable)>,
    pub run: RunFacts<'a>,
}

/// What `run.json` says of an emulation beside what every run says (the Python side adds
/// version, revision, seed and wall time).
#[derive(Debug, Serialize)]
pub struct RunFacts<'a> {
    pub run_id: String,
    pub config: &'a Config,
    pub resolved_paths: &'a [ResolvedDirection],
    pub elements: &'a [ElementInfo],
    pub hosts: &'a [HostInfo],
    pub emulated_s: f64,
    pub timing: TimingFacts,
    pub host_counters: Vec<HostSnapshot>,
    /// Cost of the `tcp_info` sampling thread; `None` when sampling was off
    /// ([`EmulatorOptions::tcp_info`]).
    pub tcp_sampling: Option<SamplingStats>,
    /// Whether the `[[flow]]` workload ran, and whether it was stopped before its end.
    pub workload: bool,
    pub interrupted: bool,
    pub warnings: &'a [String],
}

/// How well the loop kept time over the run (see [`crate::engine`] and [`crate::priority`]).
#[derive(Debug, Serialize)]
pub struct TimingFacts {
    pub release_lateness: LatenessSummary,
    pub timer_wake_lateness: LatenessSummary,
    pub reordered_pushes: u64,
    pub high_priority: bool,
    pub priority_switches: u64,
}

/// `rows` as a `flow_series` table ([`results::KERNEL_FLOW_SERIES`]).
pub fn kernel_flow_series(rows: &[FlowSeriesRow]) -> Table {
    let mut t = Table::new(results::KERNEL_FLOW_SERIES);
    rows.iter().for_each(|r| push_flow_series_row(&mut t, r));
    t
}

/// The sysctl that sets a namespace's default congestion control.
const CC_SYSCTL: &str = "net.ipv4.tcp_congestion_control";
const CC_ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
const CC_AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// A network namespace other than the first may only make a congestion control its default
/// if the machine lists it in `tcp_allowed_congestion_control` (a machine-wide list, kept by
/// the first namespace; the kernel answers EPERM otherwise). A distribution's default is in
/// it, others loaded as modules may not be (here: default bbr, allowed "reno bbr", cubic
/// available). The one a topology asks for is added to the list — it only permits, it
/// changes no one's default — and is left there, as other runs may rely on it.
fn allow_congestion_control(cc: &str) -> Result<(), EmuError> {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.split_whitespace().map(str::to_string).collect::<Vec<_>>());
    let (Ok(allowed), Ok(available)) = (read(CC_ALLOWED), read(CC_AVAILABLE)) else {
        return Ok(()); // No procfs view: let the sysctl itself report what is wrong.
    };
    if allowed.iter().any(|a| a == cc) {
        return Ok(());
    }
    if !available.iter().any(|a| a == cc) {
        return Err(EmuError::Config(ConfigError::invalid(
            "tcp.cc",
            format!("the kernel has no congestion control {cc:?} (available: {})", available.join(" ")),
        )));
    }
    let list = allowed.iter().map(String::as_str).chain([cc]).collect::<Vec<_>>().join(" ");
    std::fs::write(CC_ALLOWED, list)
        .map_err(|e| EmuError::Config(ConfigError::invalid("tcp.cc", format!("cannot allow {cc:?} in namespaces ({CC_ALLOWED}: {e})"))))
}

/// The congestion controls the kernel has now (built in or loaded:
/// `tcp_available_congestion_control`, the list `[tcp] cc` is checked against too); empty if
/// procfs cannot say.
fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string(CC_AVAILABLE).map(|s| s.split_whitespace().map(str::to_string).collect()).unwrap_or_default()
}

/// Why a mechanism of the simulator's TCP cannot be emulated.
pub(crate) const SIMULATOR_ONLY_SETTING: &str = "a setting of the simulator's TCP that the kernel's cannot take; remove it or use `pathtwin sim`";

/// Why `profile = "ns2"` cannot be emulated.
pub(crate) const NS2_PROFILE_IN_EMULATOR: &str =
    "\"ns2\" is the simulator's own TCP; the emulator runs the kernel's, which is what \"linux\" describes (remove it, or use `pathtwin sim`)";

/// The kernel runs its own congestion controls with the machine's module parameters: the
/// per-controller tables of `[tcp]` (`[tcp.cubic]`, …) are the simulator's, and silently
/// running something else than asked would make a comparison meaningless. So are
/// `[[probe]]` series.
fn reject_simulator_only_settings(cfg: &Config) -> Result<(), EmuError> {
    // The kernel is Linux: `profile = "linux"` describes it, `"ns2"` is the simulator's own TCP.
    if cfg.tcp.profile == Some(TcpProfile::Ns2) {
        return Err(EmuError::Config(ConfigError::invalid("tcp.profile", NS2_PROFILE_IN_EMULATOR)));
    }
    // Emulated hosts probe with real datagrams: `pathtwin measure --emulate` sends them.
    if !cfg.probes.is_empty() {
        return Err(EmuError::Config(ConfigError::invalid(
            "probe",
            "[[probe]] series are the simulator's; between emulated hosts `pathtwin measure --emulate` sends real probes (remove them, or use `pathtwin sim`)",
        )));
    }
    if let Some(key) = cfg.tcp.simulator_only_setting() {
        return Err(EmuError::Config(ConfigError::invalid(format!("tcp.{key}"), SIMULATOR_ONLY_SETTING)));
    }
    match cfg.tcp.controller_tables().iter().find(|(_, set)| *set) {
        Some((name, _)) => Err(EmuError::Config(ConfigError::invalid(
            format!("tcp.{name}"),
            "the emulator runs the kernel's congestion control and cannot set its parameters (they are the simulator's); remove the table or use `pathtwin sim`",
        ))),
        None => Ok(()),
    }
}

fn kernel_settings(cfg: &Config, opts: &EmulatorOptions) -> (Vec<(String, String)>, Vec<String>) {
    let t = &cfg.tcp;
    let mut sysctls = Vec::new();
    // Linux has no separate NewReno: its "reno" is NewReno (RFC 6582).
    let cc = opts.cc.clone().or_else(|| t.cc.clone()).map(|c| if c == "newreno" { "reno".to_string() } else { c });
    if let Some(cc) = cc {
        sysctls.push((CC_SYSCTL.to_string(), cc));
    }
    // (Whether the kernel lets a namespace use `cc` is settled by `allow_congestion_control`.)
    if let Some(sack) = t.sack {
        sysctls.push(("net.ipv4.tcp_sack".to_string(), if sack { "1" } else { "0" }.to_string()));
    }
    // RACK's time-based loss detection (`tcp_recovery` bit 0x1, Linux's default) and tail
    // loss probes (`tcp_early_retrans` 3, the default; 0 turns TLP off); the duplicate-ACK
    // threshold is the initial reordering degree (`tcp_reordering`, default 3).
    if let Some(rack) = t.rack {
        sysctls.push(("net.ipv4.tcp_recovery".to_string(), if rack { "1" } else { "0" }.to_string()));
    }
    if let Some(tlp) = t.tlp {
        sysctls.push(("net.ipv4.tcp_early_retrans".to_string(), if tlp { "3" } else { "0" }.to_string()));
    }
    if let Some(d) = t.dupack_threshold {
        sysctls.push(("net.ipv4.tcp_reordering".to_string(), d.to_string()));
    }
    // The window's restart after idle (RFC 2861; `tcp_cwnd_restart`), on by default.
    if let Some(on) = t.slow_start_after_idle {
        sysctls.push(("net.ipv4.tcp_slow_start_after_idle".to_string(), if on { "1" } else { "0" }.to_string()));
    }
    // 1: request ECN and accept it; 2 (Linux's default, what `ecn = false` means in the
    // simulator too): accept when asked, never ask.
    if let Some(ecn) = t.ecn {
        sysctls.push(("net.ipv4.tcp_ecn".to_string(), if ecn { "1" } else { "2" }.to_string()));
    }
    // Linux charges buffers with skb overhead and keeps about half of a buffer for data
    // (the same convention that doubles SO_SNDBUF/SO_RCVBUF), so a window of w needs 2w.
    if let Some(w) = t.rcv_window {
        let b = 2 * w.bytes();
        sysctls.push(("net.ipv4.tcp_rmem".to_string(), format!("4096 {} {b}", b.min(131072))));
    }
    if let Some(w) = t.max_window {
        let b = 2 * w.bytes();
        sysctls.push(("net.ipv4.tcp_wmem".to_string(), format!("4096 {} {b}", b.min(16384))));
    }
    let mut route_attrs = Vec::new();
    if let Some(iw) = t.initial_window {
        route_attrs.extend(["initcwnd".to_string(), iw.to_string()]);
    }
    if let Some(rto) = t.min_rto {
        route_attrs.extend(["rto_min".to_string(), format!("{}ms", rto.as_nanos().div_ceil(1_000_000))]);
    }
    if let Some(mss) = t.mss {
        route_attrs.extend(["advmss".to_string(), mss.to_string()]);
    }
    if t.delayed_ack == Some(false) {
        route_attrs.extend(["quickack".to_string(), "1".to_string()]);
    }
    // Every receiver advertises at most this, so every sender's window stays within w_max
    // (the paper's hosts: no window scaling, 64 KB).
    if let Some(w) = [t.rcv_window, t.max_window].into_iter().flatten().map(|w| w.bytes()).min() {
        route_attrs.extend(["window".to_string(), w.to_string()]);
    }
    (sysctls, route_attrs)
}

/// Monarch's proxy for `[monarch]` `m`: its probes cross the route from the sender to an
/// emulated target, or leave through the machine's stack to a real one; `routes` are the
/// emulation's (with the element-less ones the proxy's hosts need, added before).
fn monarch_proxy(m: &MonarchConfig, config: &Config, lab: &Lab, routes: &[Route], capture: Option<&std::path::Path>) -> Result<MonarchProxy, EmuError> {
    let hosts = lab.hosts();
    let id = |n: &str| hosts.iter().position(|h| h.name == n).expect("validated host");
    let (sender, receiver) = (id(&m.sender), id(&m.receiver));
    // Acknowledgment numbers of TCP probes start at a seeded offset, as real probes' would
    // not be zero-based.
    let tcp_base = (config.run.seed as u32).wrapping_mul(0x9E37_79B9) | 0x1000_0000;
    let (translator, way) = match m.target_kind(&config.hosts) {
        MonarchTarget::Host(name) => {
            let target = id(name);
            let Some(route) = routes.iter().position(|r| r.src == sender && r.dst == target && r.only.is_none()) else {
                return Err(ConfigError::invalid(
                    "monarch",
                    format!("no [[path]] or [[link]] leads from sender {:?} to target {:?}: the probes need one", m.sender, name),
                )
                .into());
            };
            if !routes.iter().any(|r| r.src == target && r.dst == sender) {
                return Err(ConfigError::invalid("monarch", format!("no route back from target {name:?} to sender {:?}", m.sender)).into());
            }
            let sequential_ids = (m.target_ip_ids == TargetIpIds::Sequential).then_some(1);
            let translator = Translator::new(m.probe, hosts[sender].ipv4, hosts[target].ipv4, tcp_base);
            (translator, ProbeWay::Emulated { route: route as u32, host: target, sequential_ids })
        }
        MonarchTarget::Real(addr) => {
            if m.target_ip_ids == TargetIpIds::Sequential {
                return Err(ConfigError::invalid(
                    "monarch.target_ip_ids",
                    "a real target's IP IDs are its own: \"sequential\" is only for an emulated target",
                )
                .into());
            }
            let target = RealTarget::open(addr, m.probe, m.max_rate()).map_err(EmuError::MonarchTarget)?;
            let route = routes.iter().position(|r| r.src == sender && r.dst == receiver).expect("the proxy's route was added");
            (Translator::new(m.probe, target.source(), addr, tcp_base), ProbeWay::Real { target, route: route as u32 })
        }
    };
    let capture = match capture {
        Some(path) => {
            let open = || -> std::io::Result<std::io::BufWriter<std::fs::File>> {
                let mut w = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(path)?);
                pathtwin_core::pcapfile::write_header(&mut w, 65_535)?;
                Ok(w)
            };
            Some(open().map_err(|e| NetnsError::Command { cmd: "monarch capture".into(), msg: format!("{}: {e}", path.display()) })?)
        }
        None => None,
    };
    Ok(MonarchProxy { translator, sender, receiver, way, released: 0, released_bytes: 0, capped: 0, send_failures: 0, capture })
}

/// An emulation whose hosts exist but whose packets do not flow yet ([`Emulator::prepare`]):
/// model time zero, the `[[flow]]` workload and the `tcp_info` sampling begin with
/// [`Prepared::start`]. In between, captures can be started on the hosts' devices, so that
/// they see every packet of the workload from its first SYN (a capture started after the
/// workload missed the handshakes of flows starting at zero, and the analysis then dropped
/// those connections).
pub struct Prepared {
    // Field order is drop order: the devices before the namespaces holding them.
    ports: Vec<crate::engine::HostPort<Tun>>,
    lab: Lab,
    net: pathtwin_core::topology::Network<crate::engine::EmuPacket>,
    routes: Vec<Route>,
    timing: TimingOptions,
    monarch: Option<MonarchProxy>,
    workload_plan: Option<workload::Plan>,
    tcp_info: bool,
    cpu_latency: Option<CpuLatencyRequest>,
    element_info: Vec<ElementInfo>,
    resolved: Vec<ResolvedDirection>,
    warnings: Vec<String>,
    config: Config,
    first_pipe_route: usize,
}

impl Prepared {
    pub fn run_id(&self) -> &RunId {
        self.lab.run_id()
    }
    pub fn hosts(&self) -> &[HostInfo] {
        self.lab.hosts()
    }
    pub fn lab(&self) -> &Lab {
        &self.lab
    }
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// This run without its `[[flow]]` workload: one stopped before it started (a capture
    /// that failed to start) ends with its tables but never runs a connection.
    pub fn without_workload(mut self) -> Prepared {
        self.workload_plan = None;
        self
    }

    /// Starts the clock (model time zero is now), the packet loop's state, the `tcp_info`
    /// sampling and the workload.
    pub fn start(self) -> Result<Emulator, EmuError> {
        let Prepared { ports, lab, net, routes, timing, monarch, workload_plan, tcp_info, cpu_latency, element_info, resolved, warnings, config, first_pipe_route } =
            self;
        let mut engine = Engine::new(ports, net, routes, timing)?;
        if let Some(proxy) = monarch {
            engine.set_monarch(proxy)?;
        }
        let sampler = if tcp_info { Some(TcpSampler::start(&lab, engine.clock(), config.run.sample_interval)?) } else { None };
        let workload = match workload_plan {
            Some(plan) => Some(Workload::start(plan, &lab, engine.clock())?),
            None => None,
        };
        Ok(Emulator { workload, engine, sampler, lab, _cpu_latency: cpu_latency, element_info, resolved, warnings, config, first_pipe_route })
    }
}

impl Emulator {
    /// Removes what dead runs left, builds the model and the hosts, and starts the clock.
    pub fn start(config: Config, opts: &EmulatorOptions) -> Result<Emulator, EmuError> {
        Emulator::prepare(config, opts)?.start()
    }

    /// Removes what dead runs left and builds the model and the hosts, without starting the
    /// clock (see [`Prepared`]).
    pub fn prepare(config: Config, opts: &EmulatorOptions) -> Result<Prepared, EmuError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(EmuError::NotRoot);
        }
        reject_simulator_only_settings(&config)?;
        cleanup_stale();
        let net = topology::compile::<crate::engine::EmuPacket>(&config)?;
        // Checked before any host exists: a flow the kernel cannot run is a config error.
        let workload_plan = if opts.workload { Some(workload::plan(&config, &net, &available_congestion_controls())?) } else { None };
        let run = opts.run_id.clone().unwrap_or_else(RunId::generate);
        let (sysctls, route_attrs) = kernel_settings(&config, opts);
        if let Some((_, cc)) = sysctls.iter().find(|(k, _)| k == CC_SYSCTL) {
            allow_congestion_control(cc)?;
        }
        let mut plan = PipePlan { per_host: vec![0; net.hosts.len()], servers: Vec::new() };
        for p in &net.pipes {
            plan.per_host[p.client] += 1;
            if !plan.servers.contains(&p.server) {
                plan.servers.push(p.server);
            }
        }
        let (lab, ports) = Lab::create(&run, &net.hosts, &sysctls, &plan, opts.offload)?;
        if !route_attrs.is_empty() {
            let pipe_range = format!("{}/16", pipe_net(&run));
            for (i, h) in lab.hosts().iter().enumerate() {
                let o = h.ipv4.octets();
                let v4net = format!("{}.{}.{}.0/24", o[0], o[1], o[2]);
                let s = h.ipv6.segments();
                let v6net = format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3]);
                // Replacing means matching the kernel's connected route, metric included
                // (0 for IPv4, 256 for IPv6); a route with another metric would be added
                // beside it and never chosen.
                let v4: Vec<&str> = vec!["-n", &h.netns, "route", "replace", &v4net, "dev", DEVICE, "metric", "0"];
                let v6: Vec<&str> = vec!["-n", &h.netns, "-6", "route", "replace", &v6net, "dev", DEVICE, "metric", "256"];
                let mut replace = vec![v4, v6];
                // A pipe server reaches its clients through the pipe range's route, which
                // must carry the same settings (e.g. the server's initial window).
                if plan.servers.contains(&i) {
                    replace.push(vec!["-n", &h.netns, "route", "replace", &pipe_range, "dev", DEVICE]);
                }
                for mut args in replace {
                    args.extend(route_attrs.iter().map(String::as_str));
                    crate::netns::ip(&args)?;
                }
            }
        }
        let n = net.hosts.len();
        let mut routes = Vec::new();
        for src in 0..n {
            for dst in 0..n {
                if let Some(hops) = net.route(src, dst) {
                    routes.push(Route { src, dst, hops: hops.to_vec(), only: None });
                }
            }
        }
        // Monarch's receiver sits next to its sender: unless the config models the way
        // between them, its packets go straight back, a route without elements. With a real
        // target the proxy's way from sender to receiver is one too (it counts what the proxy
        // took in and released; the probes cross the machine's own stack).
        if let Some(m) = &config.monarch {
            let id = |n: &str| net.host_id(n).expect("validated host");
            let (receiver, sender) = (id(&m.receiver), id(&m.sender));
            if net.route(receiver, sender).is_none() {
                routes.push(Route { src: receiver, dst: sender, hops: Vec::new(), only: None });
            }
            if matches!(m.target_kind(&config.hosts), MonarchTarget::Real(_)) && net.route(sender, receiver).is_none() {
                routes.push(Route { src: sender, dst: receiver, hops: Vec::new(), only: None });
            }
        }
        let first_pipe_route = routes.len();
        for p in &net.pipes {
            let addr = IpAddr::V4(lab.hosts()[p.client].pipe_address(p.slot).expect("a pipe's client holds its address"));
            let server = IpAddr::V4(lab.hosts()[p.server].ipv4);
            routes.push(Route { src: p.server, dst: p.client, hops: p.down.clone(), only: Some((server, addr)) });
            routes.push(Route { src: p.client, dst: p.server, hops: p.up.clone(), only: Some((addr, server)) });
        }
        let element_info = net.element_info.clone();
        let resolved = net.resolved.clone();
        let mut warnings = net.warnings.clone();
        let cpu_latency = if opts.cpu_latency_qos {
            CpuLatencyRequest::hold()
                .map_err(|e| {
                    warnings.push(format!("idle CPUs keep their default sleep (/dev/cpu_dma_latency: {e}); wake-ups add latency"))
                })
                .ok()
        } else {
            None
        };
        let timing = TimingOptions {
            spin: opts.spin,
            sample_every: config.run.sample_interval,
            high_priority: opts.high_priority,
            // Real-time wake-ups only pay off when idle CPUs poll (see `priority`).
            fifo_while_idle: cpu_latency.is_some(),
        };
        let monarch = match &config.monarch {
            Some(m) => Some(monarch_proxy(m, &config, &lab, &routes, opts.monarch_capture.as_deref())?),
            None => None,
        };
        Ok(Prepared {
            ports,
            lab,
            net,
            routes,
            timing,
            monarch,
            workload_plan,
            tcp_info: opts.tcp_info,
            cpu_latency,
            element_info,
            resolved,
            warnings,
            config,
            first_pipe_route,
        })
    }

    pub fn run_id(&self) -> &RunId {
        self.lab.run_id()
    }
    pub fn hosts(&self) -> &[HostInfo] {
        self.lab.hosts()
    }
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Becomes true once the `[[flow]]` workload has ended by itself (`None` without one).
    pub fn workload_finished(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        self.workload.as_ref().map(Workload::finished_flag)
    }

    /// Ends the workload if it still runs, keeping what it measured (call before
    /// [`Emulator::stop_sampling`] and [`Emulator::results`]: its sockets' last states then
    /// reach the `flow_series`).
    pub fn stop_workload(&mut self) {
        if let Some(w) = &mut self.workload {
            w.stop();
            self.warnings.extend(w.warnings());
        }
    }

    /// Whether the workload was stopped before its end (Ctrl-C, an early `stop`).
    pub fn workload_interrupted(&self) -> bool {
        self.workload.as_ref().is_some_and(Workload::interrupted)
    }

    /// Takes a last `tcp_info` sample of every socket and stops sampling (call before
    /// [`Emulator::results`] at the end of a run, so that the series reach its end).
    pub fn stop_sampling(&mut self) {
        if let Some(s) = &mut self.sampler {
            s.stop();
            self.warnings.extend(s.warnings());
        }
    }
    pub fn lab(&self) -> &Lab {
        &self.lab
    }
    /// The packet loop, for its counters and histograms.
    pub fn engine(&self) -> &Engine<Tun> {
        &self.engine
    }
    pub fn now(&self) -> Instant {
        self.engine.now()
    }

    /// Runs for `d` of real time, or until `stop` returns true (checked every ≤ 20 ms).
    pub fn run_for(&mut self, d: Duration, stop: impl FnMut() -> bool) -> Result<(), EmuError> {
        let until = self.engine.now() + d;
        self.engine.run_until(until, stop)?;
        Ok(())
    }

    pub fn snapshot(&self) -> Snapshot {
        let names = self.lab.hosts();
        let routes = self
            .engine
            .routes()
            .iter()
            .zip(&self.engine.route_counters)
            .take(self.first_pipe_route)
            .map(|(r, c)| RouteSnapshot {
                src: names[r.src].name.clone(),
                dst: names[r.dst].name.clone(),
                elements: r.hops.iter().map(|h| h.element).collect(),
                counters: *c,
            })
            .collect();
        let queues = self
            .engine
            .elements()
            .iter()
            .enumerate()
            .filter(|(i, _)| !is_pipe(&self.element_info[*i]))
            .filter_map(|(i, e)| e.as_queue().map(|q| (i, q)))
            .map(|(i, q)| QueueSnapshot {
                element: i,
                name: self.element_info[i].name.clone(),
                capacity_bps: q.capacity().bps(),
                abw_bps: q.abw().bps(),
                limit: q.limit().to_string(),
                occupancy: q.occupancy(),
                stats: *q.stats(),
                placeholder_share: q.placeholder_share(),
                active_flows: q.active_flows().map(<[u32]>::to_vec).unwrap_or_default(),
                avg_queue: q.qdisc_average(),
                aqm: q.aqm_stats(),
            })
            .collect();
        let markers = self
            .engine
            .elements()
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_marker().map(|m| MarkerSnapshot::new(i, self.element_info[i].name.clone(), m)))
            .collect();
        let hosts = names
            .iter()
            .zip(&self.engine.host_counters)
            .map(|(h, c)| HostSnapshot { name: h.name.clone(), counters: *c })
            .collect();
        let mut pipes = PipeTotals { pipes: (self.engine.routes().len() - self.first_pipe_route) as u64 / 2, ..Default::default() };
        for c in &self.engine.route_counters[self.first_pipe_route..] {
            pipes.packets_in += c.packets_in;
            pipes.packets_out += c.packets_out;
            pipes.write_drops += c.write_drops;
        }
        Snapshot {
            run_id: self.run_id().to_string(),
            t_s: self.engine.now().as_secs_f64(),
            routes,
            monarch: self.engine.monarch().map(|m| MonarchSnapshot {
                stats: m.translator.stats,
                held: m.translator.held(),
                released: m.released,
                released_bytes: m.released_bytes,
                capped: m.capped,
                send_failures: m.send_failures,
                source: match &m.way {
                    ProbeWay::Real { target, .. } => Some(target.source().to_string()),
                    ProbeWay::Emulated { .. } => None,
                },
            }),
            pipes,
            queues,
            markers,
            hosts,
            lateness: (&self.engine.lateness).into(),
            wake_lateness: (&self.engine.wake_lateness).into(),
            reordered_pushes: self.engine.reordered_pushes(),
            high_priority: self.engine.governor.is_some(),
            priority_switches: self.engine.governor.as_ref().map_or(0, |g| g.switches),
        }
    }

    /// Brings every queue's placeholder state up to now and gathers the results. The long
    /// tables (`queue_series`, `packet_flows`, `flow_series`) take the records the run spilled
    /// and are read when written ([`crate::long_tables`]): call it once, at the end of a run.
    pub fn results(&mut self) -> Results<'_> {
        let now = self.engine.now();
        let net = self.engine.network();
        let element_names = net.element_info.iter().map(|e| e.name.clone()).collect();
        let queue_series = QueueSeriesRows { samples: self.engine.take_queue_samples(), names: element_names };
        let route_ends = self.engine.routes().iter().map(|r| (self.lab.hosts()[r.src].name.clone(), self.lab.hosts()[r.dst].name.clone())).collect();
        let packet_flows = PacketFlowsRows { records: std::mem::take(&mut self.engine.flows), route_ends };
        let net = self.engine.network();
        let mut tables = Vec::new();
        if let Some(w) = &self.workload {
            tables.push(("flows", ResultTable::Whole(w.table())));
        }
        tables.extend([
            ("queues", ResultTable::Whole(results::queues(net, now))),
            ("queue_series", ResultTable::Long(LongTable::new("queue_series", QUEUE_SERIES, Box::new(queue_series)))),
            ("markers", ResultTable::Whole(results::markers(net))),
            ("packet_flows", ResultTable::Long(LongTable::new("packet_flows", PACKET_FLOWS, Box::new(packet_flows)))),
            ("routes", ResultTable::Whole(self.route_table())),
            ("timing", ResultTable::Whole(self.timing_table())),
        ]);
        if !net.pipes.is_empty() {
            tables.push(("pipes", ResultTable::Whole(self.pipe_table())));
        }
        let known = self.workload.as_ref().map(Workload::known_flows).unwrap_or_default();
        if let Some(s) = &self.sampler {
            tables.push(("flow_series", ResultTable::Long(s.flow_series(known))));
        }
        let snap = self.snapshot();
        let names = self.lab.hosts();
        let run = RunFacts {
            run_id: snap.run_id,
            config: &self.config,
            resolved_paths: &self.resolved,
            elements: &self.element_info,
            hosts: names,
            emulated_s: snap.t_s,
            timing: TimingFacts {
                release_lateness: snap.lateness,
                timer_wake_lateness: snap.wake_lateness,
                reordered_pushes: snap.reordered_pushes,
                high_priority: snap.high_priority,
                priority_switches: snap.priority_switches,
            },
            host_counters: snap.hosts,
            tcp_sampling: self.sampler.as_ref().map(TcpSampler::stats),
            workload: self.workload.is_some(),
            interrupted: self.workload_interrupted(),
            warnings: &self.warnings,
        };
        Results { tables, run }
    }

    /// `routes`: the routes between hosts (pipes have their own table).
    fn route_table(&self) -> Table {
        let names = self.lab.hosts();
        let mut table = Table::new(ROUTES);
        for (r, c) in self.engine.routes().iter().zip(&self.engine.route_counters).take(self.first_pipe_route) {
            table.push(vec![
                Cell::T(&names[r.src].name),
                Cell::T(&names[r.dst].name),
                Cell::I(c.packets_in as i64),
                Cell::I(c.bytes_in as i64),
                Cell::I(c.packets_out as i64),
                Cell::I(c.bytes_out as i64),
                Cell::I(c.write_drops as i64),
            ]);
        }
        table
    }

    /// `timing`: release and timer-wake lateness over the run.
    fn timing_table(&self) -> Table {
        let mut table = Table::new(TIMING);
        for (kind, h) in [("release", &self.engine.lateness), ("timer_wake", &self.engine.wake_lateness)] {
            let s = LatenessSummary::from(h);
            table.push(vec![
                Cell::T(kind),
                Cell::I(s.count as i64),
                Cell::F(s.mean_ns),
                Cell::I(s.p50_ns as i64),
                Cell::I(s.p99_ns as i64),
                Cell::I(s.p999_ns as i64),
                Cell::I(s.max_ns as i64),
            ]);
        }
        table
    }

    /// `pipes`: per `[[pipe]]` (two routes each, down then up, from `first_pipe_route` on),
    /// its address, what each direction carried, and its queue's and loss's drops.
    fn pipe_table(&self) -> Table {
        let net = self.engine.network();
        let routes = self.engine.routes();
        let mut table = Table::new(EMU_PIPES);
        for (g, pair) in routes[self.first_pipe_route..].chunks(2).enumerate() {
            let at = self.first_pipe_route + 2 * g;
            let counters = [self.engine.route_counters[at], self.engine.route_counters[at + 1]];
            let drops = |r: &Route, loss: bool| -> i64 {
                r.hops
                    .iter()
                    .map(|h| match &net.elements[h.element] {
                        Element::Queue(q) if !loss => q.stats().drops,
                        Element::Loss(l) if loss => l.drops(),
                        Element::TraceLoss(l) if loss => l.drops(),
                        _ => 0,
                    })
                    .sum::<u64>() as i64
            };
            let address = match pair[0].only {
                Some((_, IpAddr::V4(a))) => a,
                _ => unreachable!("pipe routes are built with an IPv4 client address"),
            };
            let mut row = Vec::with_capacity(EMU_PIPES.len());
            results::push_pipe(&mut row, net, g, address.to_string());
            row.extend([
                Cell::I(counters[0].packets_in as i64),
                Cell::I(counters[1].packets_in as i64),
                Cell::I(counters[0].packets_out as i64),
                Cell::I(counters[1].packets_out as i64),
                Cell::I(drops(&pair[0], false)),
                Cell::I(drops(&pair[1], false)),
                Cell::I(drops(&pair[0], true)),
                Cell::I(drops(&pair[1], true)),
            ]);
            table.push(row);
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::IpPacket;
    use pathtwin_core::marker::{Marker, Policy, SrTcm};
    use pathtwin_core::units::{Rate, Size};

    /// The snapshot's marker entry has every column of the simulator's `markers` table
    /// (python/pathtwin/results.py MARKER_COLUMNS, with `name` for `marker`), so that
    /// results from both engines line up.
    #[test]
    fn a_marker_snapshot_has_the_simulator_table_columns() {
        let mut m: Marker<IpPacket> = Marker::new(Policy::SrTcm(SrTcm::new(Rate::from_bps(8), Size::from_bytes(100), Size::from_bytes(100))));
        let mut bytes = Vec::new();
        etherparse::PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64).udp(1, 2).write(&mut bytes, &[0; 52]).unwrap();
        m.push(Instant::ZERO, IpPacket::parse(bytes).unwrap());
        let json = serde_json::to_value(MarkerSnapshot::new(4, "marker[0] h1".into(), &m)).unwrap();
        for key in [
            "name", "kind", "in_packets", "in_bytes", "out_packets", "out_bytes", "green_packets", "green_bytes", "yellow_packets",
            "yellow_bytes", "red_packets", "red_bytes", "protected_packets",
        ] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
        assert_eq!((json["kind"].as_str(), json["in_packets"].as_u64(), json["in_bytes"].as_u64()), (Some("srtcm"), Some(1), Some(80)));
    }

    fn config(tcp: &str) -> Config {
        Config::from_toml(&format!("hosts = [\"a\", \"b\"]\n[tcp]\n{tcp}"), "t.toml").unwrap()
    }

    /// `rack`, `tlp`, `dupack_threshold` and `slow_start_after_idle` become the hosts'
    /// sysctls, with the values Documentation/networking/ip-sysctl.rst gives: `tcp_recovery`
    /// bit 0x1 is RACK, `tcp_early_retrans` 0 turns tail loss probes off and 3 (the default)
    /// on, `tcp_reordering` is the initial duplicate-ACK threshold,
    /// `tcp_slow_start_after_idle` 1 (the default) restarts an idle connection's window.
    #[test]
    fn loss_recovery_switches_become_the_hosts_sysctls() {
        let (sysctls, _) = kernel_settings(&config("rack = false\ntlp = false\ndupack_threshold = 5"), &EmulatorOptions::default());
        for want in [("net.ipv4.tcp_recovery", "0"), ("net.ipv4.tcp_early_retrans", "0"), ("net.ipv4.tcp_reordering", "5")] {
            assert!(sysctls.iter().any(|(k, v)| (k.as_str(), v.as_str()) == want), "{want:?} not in {sysctls:?}");
        }
        let (sysctls, _) = kernel_settings(&config("rack = true\ntlp = true"), &EmulatorOptions::default());
        assert!(sysctls.contains(&("net.ipv4.tcp_recovery".into(), "1".into())) && sysctls.contains(&("net.ipv4.tcp_early_retrans".into(), "3".into())));
        for (on, want) in [(false, "0"), (true, "1")] {
            let (sysctls, _) = kernel_settings(&config(&format!("slow_start_after_idle = {on}")), &EmulatorOptions::default());
            assert!(sysctls.contains(&("net.ipv4.tcp_slow_start_after_idle".into(), want.into())), "{sysctls:?}");
        }
    }

    /// What the kernel has no switch for is refused, never silently dropped.
    #[test]
    fn the_simulators_own_mechanisms_are_refused() {
        for (line, key) in [
            ("newreno_timer = \"slow-but-steady\"", "tcp.newreno_timer"),
            ("lost_retransmit = true", "tcp.lost_retransmit"),
            ("ns2_rto_restart_every_ack = true", "tcp.ns2_rto_restart_every_ack"),
            ("delayed_ack_timeout = \"100ms\"", "tcp.delayed_ack_timeout"),
        ] {
            let e = reject_simulator_only_settings(&config(line)).unwrap_err().to_string();
            assert!(e.starts_with(key) && e.contains("simulator's TCP"), "{line}: {e}");
        }
        assert!(reject_simulator_only_settings(&config("rack = false\ntlp = false\nsack = false")).is_ok());
    }
}
