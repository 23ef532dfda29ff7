//! Compiles a [`Config`] into a [`Network`]: elements, and for every ordered host pair the
//! route of element hops a packet crosses. Both views end here, and both engines start here.
//!
//! Paths view (NSDI'09 Fig. 2/4): each direction of a path is a bandwidth queue followed by
//! the direction's half of the base RTT, then loss; a per-source `[[shared]]` class replaces
//! the member directions' queues by one queue whose reactivity weighs the members' ABW by
//! their flows (or holds the class's own `abw`), and each member keeps its own delay line
//! after it; a `paths` class (members of any sources) is one more queue that each member
//! crosses after its own, before its delay line, so a direction crosses every class it is in. A class's queue
//! holds its `queue`, or its `queue_delay` at its capacity, or its members' smallest queue. Links view: each direction of a link is
//! a queue with the link's propagation delay, then loss, and a route is the
//! concatenation along the lowest-delay node path (ties: fewer hops, then names), computed
//! with Dijkstra over the routers (hosts do not forward, see [`LinkRouter`]), for every host
//! pair or, with [`RouteScope::Pairs`], for the pairs a run uses: a dumbbell of 10 000 flows
//! has 20 000 hosts and 4·10⁸ host pairs. `[[marker]]` entries then add one marker element each to the routes through
//! their point (see [`place_markers`]).

use crate::bounds::{self, Bounds, PathBoundsInput, DEFAULT_MAX_QUEUE};
use crate::config::{AbwSteps, Config, ConfigError, LinkConfig, Mode, PathConfig, PerDirection, PipeConfig, Placement, QdiscSpec, SharedDirection, TableSpec, View};
use crate::element::{AbwTable, BandwidthQueue, DelayLine, Element, PathsClass, QueueRule, RandomLoss, Reactivity, Reorder, TraceLoss};
use crate::marker::{Marker, Policy};
use crate::packet::PacketMeta;
use crate::qdisc::{Discipline, DropTail};
use crate::time::{Duration, Instant};
use crate::units::{Fraction, QueueLimit, Rate};
use crate::{rng_for, Rng};
use serde::Serialize;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

/// Default capacity of a path-mode bottleneck (the paper's implementation).
pub const DEFAULT_PATH_CAPACITY: Rate = Rate::from_mbps(100);
/// Link-mode queue default: Dummynet's 73 KB (NSDI'09 Table 2).
pub const DEFAULT_LINK_MODE_QUEUE: QueueLimit = QueueLimit::Bytes(73_000);
/// Default w_max for the bounds: the largest window without window scaling.
pub const DEFAULT_WMAX: u64 = 65_535;
/// Default output queue of a `[[link]]`.
pub const DEFAULT_LINK_QUEUE: QueueLimit = QueueLimit::Packets(100);
/// Bytes per packet when a packet-count queue is compared with byte bounds.
const MTU: u64 = 1500;

/// Index of a host in [`Network::hosts`].
pub type HostId = usize;

/// One step of a route: an element and the path slot it sees the packet as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub element: usize,
    pub slot: u16,
}

/// What results call an element and what it models.
#[derive(Clone, Debug, Serialize)]
pub struct ElementInfo {
    pub name: String,
    pub kind: &'static str,
}

/// The resolved parameters of one path direction (written to run.json, printed by tools).
#[derive(Clone, Debug, Serialize)]
pub struct ResolvedDirection {
    pub path: usize,
    pub from: String,
    pub to: String,
    pub mode: Mode,
    pub capacity: Rate,
    /// ABW with one active flow.
    pub abw: Rate,
    pub one_way_delay: Duration,
    pub queue: QueueLimit,
    pub queue_derived: bool,
    /// Eq. 2 lower bound for this direction, bytes.
    pub lower_bound: u64,
    /// Eq. 4 upper bound for both directions together, bytes.
    pub upper_bound_total: f64,
    /// Whether the path's queues satisfy Eq. 2 in each direction and Eq. 4 together.
    pub feasible: bool,
    /// The per-source `[[shared]]` class whose queue replaces this direction's own.
    pub shared_class: Option<usize>,
    /// Every `[[shared]]` class this direction crosses (its per-source class and the paths
    /// classes it is in).
    pub shared_classes: Vec<usize>,
}

/// The two routes of one `[[pipe]]`: between the server's addresses and one address of the
/// client host.
#[derive(Clone, Debug)]
pub struct PipeRoute {
    pub server: HostId,
    pub client: HostId,
    /// Which of the client host's pipe addresses is this pipe's (its order among that host's
    /// pipes).
    pub slot: u32,
    /// Server to client.
    pub down: Vec<Hop>,
    /// Client to server.
    pub up: Vec<Hop>,
}

/// The client address of a run's pipe `g` (every pipe-client host counted, `[[pipe]]`
/// order) in the pipe range `range` (a /16, e.g. 10.128.0.0): `range + 1 + g`. The
/// emulator picks a range per run, the simulator 10.128.0.0, so captures of either read
/// alike. Beyond the /16 (more pipes than a run can hold) addresses wrap instead of
/// panicking.
pub fn pipe_address(range: std::net::Ipv4Addr, g: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(u32::from(range).wrapping_add(1).wrapping_add(g))
}

/// Monkey's pipe queues from the downstream rate, after Rizzo's Dummynet advice (Cheng et
/// al., USENIX ATC 2004, §4.1): below 56 kbit/s 5 packets both ways; from 56 kbit/s to 6
/// Mbit/s 30 down and 10 up; above, Dummynet's default of 40 both ways.
pub fn monkey_pipe_queues(down: Rate) -> PerDirection<QueueLimit> {
    let (d, u) = if down.bps() < 56_000 {
        (5, 5)
    } else if down.bps() <= 6_000_000 {
        (30, 10)
    } else {
        (40, 40)
    };
    PerDirection([QueueLimit::Packets(d), QueueLimit::Packets(u)])
}

/// A compiled topology over packets of type `P`.
pub struct Network<P> {
    pub hosts: Vec<String>,
    pub elements: Vec<Element<P>>,
    pub element_info: Vec<ElementInfo>,
    /// The hops of every routed (src, dst) host pair.
    routes: HashMap<(HostId, HostId), Vec<Hop>>,
    host_index: HashMap<String, HostId>,
    pub resolved: Vec<ResolvedDirection>,
    /// One entry per `[[pipe]]`, in file order. Their elements are of kind `pipe` (queue)
    /// and `pipe-loss`, so that they stay out of the per-queue tables and time series,
    /// which would grow by thousands of rows per second.
    pub pipes: Vec<PipeRoute>,
    /// Things the user should know (e.g. an infeasible derived queue and its compromise).
    pub warnings: Vec<String>,
}

impl<P> Network<P> {
    /// A network of `elements` alone, without hosts, routes or config (element `i` named
    /// `element[i]`, of its own kind): for a driver given its routes by hand, as tests do.
    pub fn of_elements(elements: Vec<Element<P>>) -> Network<P> {
        let element_info = elements
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let kind = match e {
                    Element::Delay(_) => "delay",
                    Element::Queue(_) => "queue",
                    Element::Loss(_) | Element::TraceLoss(_) => "loss",
                    Element::Reorder(_) => "reorder",
                    Element::Marker(_) => "marker",
                };
                ElementInfo { name: format!("element[{i}]"), kind }
            })
            .collect();
        Network {
            hosts: Vec::new(),
            elements,
            element_info,
            routes: HashMap::new(),
            host_index: HashMap::new(),
            resolved: Vec::new(),
            pipes: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub fn host_id(&self, name: &str) -> Option<HostId> {
        self.host_index.get(name).copied()
    }

    /// The hops from `src` to `dst`, or `None` when no path or link connects them (or, in a
    /// network compiled for some pairs only, when the pair was not among them).
    pub fn route(&self, src: HostId, dst: HostId) -> Option<&[Hop]> {
        self.routes.get(&(src, dst)).map(Vec::as_slice)
    }

    /// Indices of the bandwidth queues, in element order.
    pub fn queue_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.element_info.iter().enumerate().filter(|(_, i)| i.kind == "queue").map(|(k, _)| k)
    }

    /// Indices of the markers, in `[[marker]]` order.
    pub fn marker_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.element_info.iter().enumerate().filter(|(_, i)| i.kind == "marker").map(|(k, _)| k)
    }
}

struct Builder<'a, P> {
    cfg: &'a Config,
    net: Network<P>,
    /// Links view: (from, to, queue element) of every link direction, for markers.
    link_queues: Vec<(String, String, usize)>,
}

impl<'a, P: PacketMeta + Send + Sync + 'static> Builder<'a, P> {
    fn add(&mut self, name: String, kind: &'static str, element: Element<P>) -> usize {
        self.net.elements.push(element);
        self.net.element_info.push(ElementInfo { name, kind });
        self.net.elements.len() - 1
    }

    fn rng(&self) -> Rng {
        rng_for(self.cfg.run.seed, self.net.elements.len() as u64)
    }

    fn set_route(&mut self, src: HostId, dst: HostId, hops: Vec<Hop>) {
        self.net.routes.insert((src, dst), hops);
    }
}

/// Which host pairs of a links-view topology get a route (a path is its own pair's route).
#[derive(Clone, Copy, Debug)]
pub enum RouteScope<'a> {
    /// Every ordered pair: what the emulator needs, as any application may talk to any host.
    AllPairs,
    /// These (src, dst) pairs only: what a simulation's flows use.
    Pairs(&'a [(HostId, HostId)]),
}

/// Compiles `cfg` with a route for every host pair that a path or links connect; a config
/// that parsed but cannot be built yields a keyed [`ConfigError`].
pub fn compile<P: PacketMeta + Send + Sync + 'static>(cfg: &Config) -> Result<Network<P>, ConfigError> {
    compile_scoped(cfg, RouteScope::AllPairs)
}

/// [`compile`], routing only the host pairs `scope` names in a links-view topology.
pub fn compile_scoped<P: PacketMeta + Send + Sync + 'static>(cfg: &Config, scope: RouteScope<'_>) -> Result<Network<P>, ConfigError> {
    cfg.validate()?;
    let net = Network {
        hosts: cfg.hosts.clone(),
        host_index: cfg.hosts.iter().enumerate().map(|(i, h)| (h.clone(), i)).collect(),
        elements: Vec::new(),
        element_info: Vec::new(),
        routes: HashMap::new(),
        resolved: Vec::new(),
        pipes: Vec::new(),
        warnings: Vec::new(),
    };
    let mut b = Builder { cfg, net, link_queues: Vec::new() };
    match cfg.view() {
        View::Paths => compile_paths(&mut b)?,
        View::Links => compile_links(&mut b, scope)?,
    }
    place_markers(&mut b);
    compile_pipes(&mut b);
    Ok(b.net)
}

/// Everything about one path direction that the queue needs.
struct DirSpec {
    path: usize,
    dir: usize,
    src: HostId,
    dst: HostId,
    capacity: Rate,
    table: AbwTable,
    queue: QueueLimit,
    rule: QueueRule,
    /// Eq. 2/4 for the whole path (both directions, as configured).
    bounds: Bounds,
    /// Whether both directions' queues satisfy the bounds together.
    feasible: bool,
}

fn parse_table(spec: &TableSpec, key: &str) -> Result<AbwTable, ConfigError> {
    let mut points = Vec::new();
    for (k, rate) in &spec.0 {
        let flows: u32 = k
            .parse()
            .ok()
            .filter(|&f| f >= 1)
            .ok_or_else(|| ConfigError::invalid(key, format!("flow count {k:?} is not a whole number ≥ 1")))?;
        if rate.bps() == 0 {
            return Err(ConfigError::invalid(key, format!("ABW for {k} flows must be positive")));
        }
        points.push((flows, *rate));
    }
    AbwTable::new(points).ok_or_else(|| ConfigError::invalid(key, "empty reactivity table"))
}

/// The drop-tail queue that, full, delays a packet by `delay` at `capacity`: `delay` ×
/// `capacity` bytes (a `[[shared]]` class's `queue_delay`); None when that is less than one
/// full packet, which no queue holding a packet can be.
fn queue_for_delay(delay: Duration, capacity: Rate) -> Option<QueueLimit> {
    let bytes = capacity.bytes_in(delay);
    (bytes >= MTU).then_some(QueueLimit::Bytes(bytes))
}

fn limit_bytes(q: QueueLimit) -> u64 {
    match q {
        QueueLimit::Bytes(b) => b,
        QueueLimit::Packets(p) => p * MTU,
    }
}

fn dir_specs(i: usize, p: &PathConfig, hosts: &[String], warnings: &mut Vec<String>) -> Result<[DirSpec; 2], ConfigError> {
    let key = format!("path[{i}]");
    let tables: [AbwTable; 2] = match (&p.abw, &p.reactivity) {
        (Some(abw), _) => {
            for d in 0..2 {
                if abw.get(d).bps() == 0 {
                    return Err(ConfigError::invalid(format!("{key}.abw"), "ABW must be positive"));
                }
            }
            [AbwTable::constant(abw.get(0)), AbwTable::constant(abw.get(1))]
        }
        (None, Some(r)) => [parse_table(r.table(0), &format!("{key}.reactivity"))?, parse_table(r.table(1), &format!("{key}.reactivity"))?],
        (None, None) => unreachable!("validate() requires abw or reactivity"),
    };
    let abw1 = [tables[0].at(1), tables[1].at(1)];
    let capacity = match p.mode {
        Mode::Path => p.capacity.map(|c| c.0).unwrap_or([DEFAULT_PATH_CAPACITY; 2]),
        Mode::Link => {
            if p.capacity.is_some() {
                return Err(ConfigError::invalid(format!("{key}.capacity"), "mode = \"link\" drains at the ABW; capacity is not used"));
            }
            if !tables[0].is_constant() || !tables[1].is_constant() {
                return Err(ConfigError::invalid(format!("{key}.reactivity"), "mode = \"link\" takes a constant abw"));
            }
            abw1
        }
    };
    for d in 0..2 {
        if capacity[d] < abw1[d] {
            return Err(ConfigError::invalid(format!("{key}.capacity"), format!("capacity {} is below the ABW {}", capacity[d], abw1[d])));
        }
    }
    let wmax = p.wmax.map(|s| s.bytes()).unwrap_or(DEFAULT_WMAX);
    let flows = p.flows.map(|f| f.0).unwrap_or([1, 1]);
    let max_queue = p.max_queue.map(|s| s.bytes()).unwrap_or(DEFAULT_MAX_QUEUE);
    let inputs = PathBoundsInput { abw: abw1, capacity, rtt_base: p.rtt, wmax, flows };
    let derivation = bounds::derive(&inputs, max_queue);
    let (queue, rules): ([QueueLimit; 2], [QueueRule; 2]) = match (p.mode, p.queue) {
        (Mode::Link, q) => {
            let q = q.map(|q| q.0).unwrap_or([DEFAULT_LINK_MODE_QUEUE; 2]);
            (q, [QueueRule::Fixed(q[0]), QueueRule::Fixed(q[1])])
        }
        (Mode::Path, Some(q)) => {
            if p.enforce_bounds {
                let bytes = [limit_bytes(q.get(0)), limit_bytes(q.get(1))];
                let b = derivation.bounds;
                for d in 0..2 {
                    if bytes[d] < b.lower[d] {
                        return Err(ConfigError::invalid(
                            format!("{key}.queue"),
                            format!(
                                "{} for {}->{} is below Eq. 2's lower bound of {} B (set enforce_bounds = false to run it anyway)",
                                q.get(d),
                                hosts_of(p, d).0,
                                hosts_of(p, d).1,
                                b.lower[d]
                            ),
                        ));
                    }
                }
                if (bytes[0] + bytes[1]) as f64 > b.upper_total {
                    return Err(ConfigError::invalid(
                        format!("{key}.queue"),
                        format!(
                            "{} + {} B exceeds Eq. 4's upper bound of {:.0} B for both directions (set enforce_bounds = false to run it anyway)",
                            bytes[0], bytes[1], b.upper_total.max(0.0)
                        ),
                    ));
                }
            }
            (q.0, [QueueRule::Fixed(q.get(0)), QueueRule::Fixed(q.get(1))])
        }
        (Mode::Path, None) => {
            if !derivation.feasible {
                warnings.push(format!(
                    "{key}: no queue size satisfies both Eq. 2 (lower {} B / {} B) and Eq. 4 (upper {:.0} B total); using the compromise {} B / {} B",
                    derivation.bounds.lower[0], derivation.bounds.lower[1], derivation.bounds.upper_total.max(0.0), derivation.queue[0], derivation.queue[1]
                ));
            }
            let q = derivation.queue.map(QueueLimit::Bytes);
            let rules = [0, 1].map(|d| QueueRule::Derived { inputs, direction: d, max_queue });
            (q, rules)
        }
    };
    let [r0, r1] = rules;
    let [t0, t1] = tables;
    let id = |h: &str| hosts.iter().position(|x| x == h).expect("validated host");
    let (a, b) = (id(&p.between[0]), id(&p.between[1]));
    let bnd = derivation.bounds;
    let bytes = queue.map(limit_bytes);
    let feasible = bytes[0] >= bnd.lower[0] && bytes[1] >= bnd.lower[1] && (bytes[0] + bytes[1]) as f64 <= bnd.upper_total;
    Ok([
        DirSpec { path: i, dir: 0, src: a, dst: b, capacity: capacity[0], table: t0, queue: queue[0], rule: r0, bounds: bnd, feasible },
        DirSpec { path: i, dir: 1, src: b, dst: a, capacity: capacity[1], table: t1, queue: queue[1], rule: r1, bounds: bnd, feasible },
    ])
}

/// A direction's ABW steps as model times, each checked against its capacity.
fn abw_steps(p: &PathConfig, i: usize, d: usize, capacity: Rate) -> Result<Vec<(Instant, Rate)>, ConfigError> {
    let Some(steps) = &p.abw_steps else { return Ok(Vec::new()) };
    let list = steps.direction(d);
    for (k, &(_, abw)) in list.iter().enumerate() {
        if abw > capacity {
            return Err(ConfigError::invalid(
                format!("path[{i}].abw_steps.{}[{k}]", AbwSteps::key(d)),
                format!("ABW {abw} is above the capacity {capacity}"),
            ));
        }
    }
    Ok(list.iter().map(|&(t, abw)| (Instant::ZERO + t, abw)).collect())
}

fn hosts_of(p: &PathConfig, d: usize) -> (&str, &str) {
    (&p.between[d], &p.between[1 - d])
}

/// A bandwidth queue with the discipline an entry asks for (`qdisc`, and its `red`, `rio`
/// and `frio` tables; validated with the config), before a one-way `delay`.
fn new_queue<P: PacketMeta + Send + Sync + 'static>(capacity: Rate, abw: Rate, limit: QueueLimit, delay: Duration, q: QdiscSpec<'_>, rng: Rng) -> BandwidthQueue<P> {
    BandwidthQueue::new(capacity, abw, Discipline::from_spec(q, limit, capacity, delay), rng)
}

fn compile_paths<P: PacketMeta + Send + Sync + 'static>(b: &mut Builder<'_, P>) -> Result<(), ConfigError> {
    let cfg = b.cfg;
    let mut specs: Vec<DirSpec> = Vec::new();
    for (i, p) in cfg.paths.iter().enumerate() {
        let [d0, d1] = dir_specs(i, p, &cfg.hosts, &mut b.net.warnings)?;
        for d in [&d0, &d1] {
            if specs.iter().any(|s| s.src == d.src && s.dst == d.dst) {
                return Err(ConfigError::invalid(format!("path[{i}].between"), format!("a second path between {} and {}", p.between[0], p.between[1])));
            }
        }
        specs.push(d0);
        specs.push(d1);
    }
    // Shared classes: which spec joins which class, as which slot. A per-source class's
    // queue replaces its members' own (`replaced_by`); a paths class's queue is crossed after
    // it (`crosses`, in config order), and a direction may cross several.
    let mut replaced_by: BTreeMap<usize, (usize, u16)> = BTreeMap::new();
    let mut crosses: BTreeMap<usize, Vec<(usize, u16)>> = BTreeMap::new();
    let mut class_queue: Vec<usize> = Vec::new();
    for (c, s) in cfg.shared.iter().enumerate() {
        let mut members = Vec::new();
        for (j, ((from, to), at)) in s.members().into_iter().enumerate() {
            let (a, z) = (b.net.host_id(from).expect("validated"), b.net.host_id(to).expect("validated"));
            let k = specs
                .iter()
                .position(|x| x.src == a && x.dst == z)
                .ok_or_else(|| ConfigError::invalid(format!("shared[{c}].{at}"), format!("no [[path]] between {from} and {to}")))?;
            if cfg.paths[specs[k].path].abw_steps.as_ref().is_some_and(|st| !st.direction(specs[k].dir).is_empty()) {
                return Err(ConfigError::invalid(
                    format!("path[{}].abw_steps", specs[k].path),
                    format!("the direction {from}->{to} is in shared[{c}], whose ABW follows its paths' flows; steps over time need a path of its own"),
                ));
            }
            if cfg.paths[specs[k].path].mode == Mode::Link {
                return Err(ConfigError::invalid(format!("shared[{c}]"), "shared bottlenecks need mode = \"path\""));
            }
            if s.per_source() {
                if replaced_by.contains_key(&k) {
                    return Err(ConfigError::invalid(format!("shared[{c}].{at}"), "this path direction is already in another source's shared class"));
                }
                replaced_by.insert(k, (c, j as u16));
            } else {
                crosses.entry(k).or_default().push((c, j as u16));
            }
            members.push(k);
        }
        let capacity = s.capacity.unwrap_or_else(|| members.iter().map(|&k| specs[k].capacity).max().expect("≥ 2 members"));
        let limit = match (s.queue, s.queue_delay) {
            (Some(q), _) => q,
            (None, Some(delay)) => queue_for_delay(delay, capacity).ok_or_else(|| {
                ConfigError::invalid(format!("shared[{c}].queue_delay"), format!("{delay} at the class's capacity {capacity} holds less than one {MTU}-byte packet"))
            })?,
            (None, None) => members.iter().map(|&k| specs[k].queue).min_by_key(|&q| limit_bytes(q)).expect("members"),
        };
        // A shared queue takes the discipline of its first member path.
        let first = &cfg.paths[specs[members[0]].path];
        let delay = half_rtt(first.rtt, specs[members[0]].dir);
        if let Some(abw) = s.abw.filter(|&abw| abw > capacity) {
            return Err(ConfigError::invalid(format!("shared[{c}].abw"), format!("ABW {abw} is above the class's capacity {capacity}")));
        }
        let tables: Vec<AbwTable> = members.iter().map(|&k| specs[k].table.clone()).collect();
        let reactivity = Reactivity::new(tables, QueueRule::Fixed(limit), cfg.run.flow_idle_timeout);
        let queue = match (s.per_source(), s.abw) {
            // One source's class replaces its members' queues: `abw` throughout.
            (true, Some(abw)) => new_queue(capacity, abw, limit, delay, first.qdisc_spec(), b.rng()),
            (per_source, together) => {
                // §2.3's flow-weighted mean of the members' tables, where it is used, must fit.
                let mean = reactivity.current_abw();
                if together.is_none() && mean > capacity {
                    return Err(ConfigError::invalid(format!("shared[{c}].capacity"), format!("capacity {capacity} is below its paths' ABW {mean}")));
                }
                // A paths class binds while two or more members carry flows (`PathsClass`).
                let reactivity = if per_source { reactivity } else { reactivity.for_paths_class(PathsClass::new(together, capacity)) };
                new_queue(capacity, reactivity.current_abw(), limit, delay, first.qdisc_spec(), b.rng()).with_reactivity(reactivity)
            }
        };
        let name = match (&s.source, s.direction.unwrap_or_default()) {
            (Some(src), SharedDirection::Out) => format!("shared[{c}] {src}->{{{}}}", s.destinations.join(",")),
            (Some(src), SharedDirection::In) => format!("shared[{c}] {{{}}}->{src}", s.destinations.join(",")),
            (None, _) => format!("shared[{c}] {{{}}}", s.paths.iter().map(|[a, z]| format!("{a}->{z}")).collect::<Vec<_>>().join(",")),
        };
        class_queue.push(b.add(name, "queue", Element::Queue(queue)));
    }
    for (k, s) in specs.into_iter().enumerate() {
        let p = &cfg.paths[s.path];
        let (from, to) = (b.net.hosts[s.src].clone(), b.net.hosts[s.dst].clone());
        let mut hops = Vec::new();
        let shared_class = replaced_by.get(&k).map(|&(c, _)| c);
        let crossed = crosses.remove(&k).unwrap_or_default();
        let one_way = half_rtt(p.rtt, s.dir);
        match replaced_by.get(&k) {
            Some(&(c, slot)) => hops.push(Hop { element: class_queue[c], slot }),
            None => {
                let abw = s.table.at(1);
                let mut q = new_queue(s.capacity, abw, s.queue, one_way, p.qdisc_spec(), b.rng());
                if shared_class.is_none() && crossed.is_empty() {
                    q = q.with_propagation(one_way);
                }
                if !s.table.is_constant() {
                    q = q.with_reactivity(Reactivity::new(vec![s.table.clone()], s.rule.clone(), cfg.run.flow_idle_timeout));
                }
                let steps = abw_steps(p, s.path, s.dir, s.capacity)?;
                if !steps.is_empty() {
                    q = q.with_abw_steps(&steps);
                }
                hops.push(Hop { element: b.add(format!("{from}->{to}"), "queue", Element::Queue(q)), slot: 0 });
            }
        }
        // The classes of other sources this direction shares, then its propagation delay.
        hops.extend(crossed.iter().map(|&(c, slot)| Hop { element: class_queue[c], slot }));
        if shared_class.is_some() || !crossed.is_empty() {
            let delay = Element::Delay(DelayLine::new(one_way));
            hops.push(Hop { element: b.add(format!("{from}->{to} delay"), "delay", delay), slot: 0 });
        }
        let mut shared_classes: Vec<usize> = shared_class.into_iter().chain(crossed.iter().map(|&(c, _)| c)).collect();
        shared_classes.sort_unstable();
        if let Some(loss) = p.loss.map(|l| l.get(s.dir)).filter(|l| l.get() > 0.0) {
            let rng = b.rng();
            hops.push(Hop { element: b.add(format!("{from}->{to} loss"), "loss", Element::Loss(RandomLoss::new(loss, rng))), slot: 0 });
        }
        hops.extend(reorder_hop(b, p.reorder.map(|r| r.get(s.dir)), p.reorder_delay, &format!("{from}->{to}")));
        b.net.resolved.push(ResolvedDirection {
            path: s.path,
            from,
            to,
            mode: p.mode,
            capacity: s.capacity,
            abw: s.table.at(1),
            one_way_delay: one_way,
            queue: s.queue,
            queue_derived: matches!(s.rule, QueueRule::Derived { .. }),
            lower_bound: s.bounds.lower[s.dir],
            upper_bound_total: s.bounds.upper_total,
            feasible: s.feasible,
            shared_class,
            shared_classes,
        });
        b.set_route(s.src, s.dst, hops);
    }
    Ok(())
}

fn compile_links<P: PacketMeta + Send + Sync + 'static>(b: &mut Builder<'_, P>, scope: RouteScope<'_>) -> Result<(), ConfigError> {
    let cfg = b.cfg;
    let nodes: Vec<&str> = cfg.hosts.iter().chain(&cfg.routers).map(String::as_str).collect();
    let ids: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let node_id = |n: &str| *ids.get(n).expect("validated node");
    // adjacency: node -> (neighbour, delay, hops of this link direction)
    let mut adj: Vec<Vec<(usize, Duration, Vec<Hop>)>> = vec![Vec::new(); nodes.len()];
    for (i, l) in cfg.links.iter().enumerate() {
        let (a, c) = (node_id(&l.between[0]), node_id(&l.between[1]));
        if a == c {
            return Err(ConfigError::invalid(format!("link[{i}].between"), "a link needs two different nodes"));
        }
        for d in 0..2 {
            let (from, to) = if d == 0 { (a, c) } else { (c, a) };
            let hops = link_direction(b, l, d, nodes[from], nodes[to]);
            // The direction's queue is its first hop; markers placed on it go before it.
            b.link_queues.push((nodes[from].to_string(), nodes[to].to_string(), hops[0].element));
            adj[from].push((to, l.delay, hops));
        }
    }
    let router = LinkRouter::new(&adj, cfg.hosts.len());
    let n_hosts = cfg.hosts.len();
    let mut route_from = |src: usize, dsts: &mut dyn Iterator<Item = usize>| {
        let tree = router.from_source(src);
        for dst in dsts {
            if let Some(hops) = router.route(&tree, dst) {
                b.set_route(src, dst, hops);
            }
        }
    };
    match scope {
        RouteScope::AllPairs => {
            for src in 0..n_hosts {
                route_from(src, &mut (0..n_hosts).filter(|&d| d != src));
            }
        }
        RouteScope::Pairs(pairs) => {
            let mut by_source: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for &(src, dst) in pairs.iter().filter(|(s, d)| s != d) {
                by_source.entry(src).or_default().push(dst);
            }
            for (src, dsts) in by_source {
                route_from(src, &mut dsts.into_iter());
            }
        }
    }
    Ok(())
}

/// Routes of a links-view topology. Hosts do not forward, so a route between two hosts is an
/// edge out of the source, a shortest path among routers, and an edge into the destination:
/// one Dijkstra per source over the routers alone, then for each destination the best of its
/// in-edges. This gives the routes of a Dijkstra over every node with the same order (lowest
/// delay, then fewest hops, then lowest node index; among equal candidates the first relaxed
/// wins: the source's own edges, then the routers in the order they settle, each edge in link
/// order), at a cost that does not grow with the number of other hosts.
struct LinkRouter<'g> {
    adj: &'g [Vec<(usize, Duration, Vec<Hop>)>],
    n_hosts: usize,
    /// Per host: the (node, edge index) of every link direction into it.
    into_host: Vec<Vec<(usize, usize)>>,
    /// Per node: the indices of its edges that lead to routers (a dumbbell's routers have
    /// thousands of edges to hosts, which the per-source search must not walk).
    to_routers: Vec<Vec<usize>>,
}

/// Router labels from one source: `label[r]` = (delay, hops, settle order, previous node and
/// edge) of router `n_hosts + r`; the source's edges are settle order 0.
struct SourceTree {
    src: usize,
    label: Vec<Option<(Duration, u32, u32, usize, usize)>>,
}

impl<'g> LinkRouter<'g> {
    fn new(adj: &'g [Vec<(usize, Duration, Vec<Hop>)>], n_hosts: usize) -> Self {
        let mut into_host = vec![Vec::new(); n_hosts];
        let mut to_routers = vec![Vec::new(); adj.len()];
        for (u, edges) in adj.iter().enumerate() {
            for (e, (v, _, _)) in edges.iter().enumerate() {
                if *v < n_hosts {
                    into_host[*v].push((u, e));
                } else {
                    to_routers[u].push(e);
                }
            }
        }
        LinkRouter { adj, n_hosts, into_host, to_routers }
    }

    fn from_source(&self, src: usize) -> SourceTree {
        let routers = self.adj.len() - self.n_hosts;
        // Tentative (delay, hops, previous node, edge) per router; settled ones get an order.
        let mut best: Vec<Option<(Duration, u32, usize, usize)>> = vec![None; routers];
        let mut label = vec![None; routers];
        let mut heap = BinaryHeap::new();
        let relax = |best: &mut Vec<Option<(Duration, u32, usize, usize)>>, heap: &mut BinaryHeap<_>, u: usize, dist: Duration, hops: u32| {
            // Hosts are reached through `into_host`, at the end.
            for &e in &self.to_routers[u] {
                let (v, delay, _) = &self.adj[u][e];
                let (r, cand) = (*v - self.n_hosts, (dist + *delay, hops + 1));
                if best[r].is_none_or(|(d, h, _, _)| cand < (d, h)) {
                    best[r] = Some((cand.0, cand.1, u, e));
                    heap.push(std::cmp::Reverse((cand.0, cand.1, *v)));
                }
            }
        };
        relax(&mut best, &mut heap, src, Duration::ZERO, 0);
        let mut settled = 0u32;
        while let Some(std::cmp::Reverse((dist, hops, v))) = heap.pop() {
            let r = v - self.n_hosts;
            let Some((d, h, u, e)) = best[r] else { continue };
            if (d, h) != (dist, hops) || label[r].is_some() {
                continue;
            }
            settled += 1;
            label[r] = Some((d, h, settled, u, e));
            relax(&mut best, &mut heap, v, dist, hops);
        }
        SourceTree { src, label }
    }

    /// The hops from the tree's source to host `dst`, if connected.
    fn route(&self, tree: &SourceTree, dst: usize) -> Option<Vec<Hop>> {
        let at = |u: usize| -> Option<(Duration, u32, u32)> {
            if u == tree.src {
                Some((Duration::ZERO, 0, 0))
            } else if u >= self.n_hosts {
                tree.label[u - self.n_hosts].map(|(d, h, order, _, _)| (d, h, order))
            } else {
                None // another host: hosts do not forward
            }
        };
        let (u, e) = self
            .into_host[dst]
            .iter()
            .filter_map(|&(u, e)| at(u).map(|(d, h, order)| (((d + self.adj[u][e].1, h + 1), (order, e)), (u, e))))
            .min_by_key(|&(key, _)| key)?
            .1;
        let mut chain = vec![&self.adj[u][e].2];
        let mut node = u;
        while node != tree.src {
            let (_, _, _, prev, edge) = tree.label[node - self.n_hosts].expect("settled router");
            chain.push(&self.adj[prev][edge].2);
            node = prev;
        }
        Some(chain.into_iter().rev().flatten().copied().collect())
    }
}

fn link_direction<P: PacketMeta + Send + Sync + 'static>(b: &mut Builder<'_, P>, l: &LinkConfig, d: usize, from: &str, to: &str) -> Vec<Hop> {
    let rate = l.rate.get(d);
    let limit = l.queue.map(|q| q.get(d)).unwrap_or(DEFAULT_LINK_QUEUE);
    let q = new_queue(rate, rate, limit, l.delay, l.qdisc_spec(), b.rng()).with_propagation(l.delay);
    let mut hops = vec![Hop { element: b.add(format!("{from}->{to}"), "queue", Element::Queue(q)), slot: 0 }];
    if let Some(loss) = l.loss.map(|x| x.get(d)).filter(|x| x.get() > 0.0) {
        let rng = b.rng();
        hops.push(Hop { element: b.add(format!("{from}->{to} loss"), "loss", Element::Loss(RandomLoss::new(loss, rng))), slot: 0 });
    }
    hops.extend(reorder_hop(b, l.reorder.map(|r| r.get(d)), l.reorder_delay, &format!("{from}->{to}")));
    hops
}

/// A direction's reordering element, after its loss, when it reorders at all.
fn reorder_hop<P: PacketMeta + Send + Sync + 'static>(b: &mut Builder<'_, P>, share: Option<Fraction>, delay: Option<Duration>, name: &str) -> Option<Hop> {
    let share = share.filter(|x| x.get() > 0.0)?;
    let rng = b.rng();
    let delay = delay.unwrap_or(crate::config::DEFAULT_REORDER_DELAY);
    Some(Hop { element: b.add(format!("{name} reorder"), "reorder", Element::Reorder(Reorder::new(share, delay, rng))), slot: 0 })
}

/// Adds each `[[pipe]]`'s elements (after the markers, so that neither moves the others' RNG
/// streams) and its two routes. Markers do not apply to pipes.
fn compile_pipes<P: PacketMeta + Send + Sync + 'static>(b: &mut Builder<'_, P>) {
    let cfg = b.cfg;
    let mut slots: BTreeMap<&str, u32> = BTreeMap::new();
    for p in &cfg.pipes {
        let slot = slots.entry(p.between[1].as_str()).or_default();
        let name = format!("{}#{}", p.between[1], *slot);
        let queues = p.queue.unwrap_or_else(|| monkey_pipe_queues(p.rate.get(0)));
        let mut dirs = Vec::with_capacity(2);
        for (d, (from, to)) in [(p.between[0].as_str(), name.as_str()), (name.as_str(), p.between[0].as_str())].into_iter().enumerate() {
            dirs.push(pipe_direction(b, p, d, queues.get(d), &format!("{from}->{to}")));
        }
        let up = dirs.pop().expect("two directions");
        let down = dirs.pop().expect("two directions");
        let host = |n: &str| b.net.host_id(n).expect("validated host");
        b.net.pipes.push(PipeRoute { server: host(&p.between[0]), client: host(&p.between[1]), slot: *slot, down, up });
        *slot += 1;
    }
}

/// Direction `d`'s share of a base RTT: halves, the odd nanosecond going to direction 0.
fn half_rtt(rtt: Duration, d: usize) -> Duration {
    let rtt = rtt.as_nanos();
    Duration::from_nanos(if d == 0 { rtt - rtt / 2 } else { rtt / 2 })
}

fn pipe_direction<P: PacketMeta + Send + Sync + 'static>(b: &mut Builder<'_, P>, p: &PipeConfig, d: usize, limit: QueueLimit, name: &str) -> Vec<Hop> {
    let rate = p.rate.get(d);
    let q = BandwidthQueue::new(rate, rate, Discipline::DropTail(DropTail::new(limit)), b.rng()).with_propagation(half_rtt(p.rtt, d));
    let mut hops = Vec::with_capacity(3);
    // The trace's drops come ahead of the queue: they include the traced queue's overflows,
    // and the replay's queue then sees the survivors the traced one let through, so that
    // no loss happens twice (`pathtwin-trace`'s `losses`).
    if let Some(offsets) = p.drop.as_ref().map(|drops| &drops[d]).filter(|o| !o.is_empty()) {
        hops.push(Hop { element: b.add(format!("{name} drop"), "pipe-loss", Element::TraceLoss(TraceLoss::new(offsets))), slot: 0 });
    }
    hops.push(Hop { element: b.add(name.to_string(), "pipe", Element::Queue(q)), slot: 0 });
    if let Some(loss) = p.loss.map(|x| x.get(d)).filter(|x| x.get() > 0.0) {
        let rng = b.rng();
        hops.push(Hop { element: b.add(format!("{name} loss"), "pipe-loss", Element::Loss(RandomLoss::new(loss, rng))), slot: 0 });
    }
    hops
}

/// Adds one marker element per `[[marker]]` entry (after all other elements, so that their
/// RNG streams do not move) and puts it on the routes through its point: a path or link
/// direction's marker right before that direction's queue on every route that crosses it; a
/// host's marker as the first hop of every route from the host, ahead of entrance markers.
/// Markers at one point keep their config order.
fn place_markers<P: PacketMeta + Send + Sync + 'static>(b: &mut Builder<'_, P>) {
    let cfg = b.cfg;
    let mut egress_count = vec![0usize; b.net.hosts.len()];
    let elements: Vec<usize> = cfg.markers.iter().enumerate().map(|(i, m)| b.add(m.element_name(i), "marker", Element::Marker(Marker::new(Policy::from_config(m))))).collect();
    // Entrances first, so that egress markers (inserted at the front) end up ahead of them.
    let entrances = cfg.markers.iter().enumerate().filter(|(_, m)| matches!(m.placement(), Placement::Direction(..)));
    let egresses = cfg.markers.iter().enumerate().filter(|(_, m)| matches!(m.placement(), Placement::Host(_)));
    for (i, m) in entrances.chain(egresses) {
        let hop = Hop { element: elements[i], slot: 0 };
        match m.placement() {
            Placement::Host(h) => {
                let h = b.net.host_id(h).expect("validated host");
                for (_, route) in b.net.routes.iter_mut().filter(|((src, _), _)| *src == h) {
                    route.insert(egress_count[h], hop);
                }
                egress_count[h] += 1;
            }
            Placement::Direction(from, to) => {
                let queues: Vec<usize> = match cfg.view() {
                    // A path direction's queue (its own or its shared class's) is the first
                    // hop of that one route; a shared queue is not marked for other members.
                    View::Paths => {
                        let (a, c) = (b.net.host_id(from).expect("validated"), b.net.host_id(to).expect("validated"));
                        let route = b.net.routes.get_mut(&(a, c)).expect("a path's route");
                        let at = route.iter().position(|x| b.net.element_info[x.element].kind != "marker").expect("a queue");
                        route.insert(at, hop);
                        continue;
                    }
                    View::Links => b.link_queues.iter().filter(|(f, t, _)| f == from && t == to).map(|&(_, _, q)| q).collect(),
                };
                for route in b.net.routes.values_mut() {
                    if let Some(at) = route.iter().position(|x| queues.contains(&x.element)) {
                        route.insert(at, hop);
                    }
                }
            }
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BinaryHeap;

    /// The Dijkstra over every node this module routed with before [`LinkRouter`]: lowest
        /// total delay, then fewest hops, then lowest node index; hosts do not forward.
    fn dijkstra<T>(adj: &[Vec<(usize, Duration, T)>], src: usize, n_hosts: usize) -> Vec<Option<(usize, usize)>> {
        let n = adj.len();
        let mut best: Vec<Option<(Duration, u32)>> = vec![None; n];
        let mut prev: Vec<Option<(usize, usize)>> = vec![None; n];
        let mut heap = BinaryHeap::new();
        best[src] = Some((Duration::ZERO, 0));
        heap.push(std::cmp::Reverse((Duration::ZERO, 0u32, src)));
        while let Some(std::cmp::Reverse((dist, hops, u))) = heap.pop() {
            if best[u] != Some((dist, hops)) {
                continue;
            }
            if u != src && u < n_hosts {
                continue;
            }
            for (e, (v, delay, _)) in adj[u].iter().enumerate() {
                let cand = (dist + *delay, hops + 1);
                if best[*v].is_none_or(|b| cand < b) {
                    best[*v] = Some(cand);
                    prev[*v] = Some((u, e));
                    heap.push(std::cmp::Reverse((cand.0, cand.1, *v)));
                }
            }
        }
        prev
    }

    /// The route the reference Dijkstra gives, as the concatenated hops of its edges.
    fn reference_route(adj: &[Vec<(usize, Duration, Vec<Hop>)>], n_hosts: usize, src: usize, dst: usize) -> Option<Vec<Hop>> {
        let prev = dijkstra(adj, src, n_hosts);
        let mut chain = Vec::new();
        let mut at = dst;
        while at != src {
            let (from, edge) = prev[at]?;
            chain.push(adj[from][edge].2.clone());
            at = from;
        }
        chain.reverse();
        Some(chain.concat())
    }

    proptest! {
        /// Random topologies with ties everywhere (delays of 0-2 ms, parallel links, hosts
        /// linked to hosts): the per-source router Dijkstra picks the very routes of the
        /// all-node Dijkstra, for every host pair.
        #[test]
        fn link_router_routes_as_the_all_node_dijkstra(
            n_hosts in 2usize..7,
            n_routers in 0usize..6,
            links in proptest::collection::vec((0usize..13, 0usize..13, 0u64..3), 0..30),
        ) {
            let n = n_hosts + n_routers;
            let mut adj: Vec<Vec<(usize, Duration, Vec<Hop>)>> = vec![Vec::new(); n];
            let mut element = 0;
            for (a, c, ms) in links {
                let (a, c) = (a % n, c % n);
                if a == c {
                    continue;
                }
                for (from, to) in [(a, c), (c, a)] {
                    adj[from].push((to, Duration::from_millis(ms), vec![Hop { element, slot: 0 }]));
                    element += 1;
                }
            }
            let router = LinkRouter::new(&adj, n_hosts);
            for src in 0..n_hosts {
                let tree = router.from_source(src);
                for dst in (0..n_hosts).filter(|&d| d != src) {
                    prop_assert_eq!(router.route(&tree, dst), reference_route(&adj, n_hosts, src, dst), "{} -> {}", src, dst);
                }
            }
        }
    }
}
