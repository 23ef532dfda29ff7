//! Every result table's schema, declared once for both engines, and the tables built from the
//! model alone.
//!
//! A run's directory holds `run.json` and one Parquet file per table (`<name>.parquet`). A
//! table that both engines write has one schema here, and both build it with the same code
//! where the model has what it needs: [`queues`], [`markers`], [`push_queue_sample`]
//! (`queue_series`) and [`push_pipe`] (`pipes`). What only one engine can measure comes as
//! extra columns after the shared ones (the kernel's `tcp_info` fields in the emulator's
//! [`KERNEL_FLOW_SERIES`], the emulator's per-pipe packet counts in [`EMU_PIPES`]), or as a
//! table of its own ([`PACKET_FLOWS`], [`ROUTES`], [`TIMING`]). Python never restates a
//! schema: it reads the files, or the columns `pathtwin-py` hands over.
//!
//! | table | simulator | emulator |
//! |---|---|---|
//! | `flows` ([`FLOWS`]) | one row per TCP connection of the `[[flow]]` workload | the same, when it runs the workload (`pathtwin_emu::workload`) |
//! | `flow_series` | [`FLOW_SERIES`], from the endpoints | [`KERNEL_FLOW_SERIES`], from `tcp_info` |
//! | `queues` ([`QUEUES`]) | yes | yes |
//! | `queue_series` ([`QUEUE_SERIES`]) | yes | yes |
//! | `markers` ([`MARKERS`]) | yes | yes |
//! | `pipes` | [`PIPES`] | [`EMU_PIPES`] |
//! | `probes` ([`PROBES`]) | one row per `[[probe]]` datagram | — (its hosts' programs probe) |
//! | `packet_flows`, `routes`, `timing` | — | [`PACKET_FLOWS`], [`ROUTES`], [`TIMING`] |

use crate::driver::QueueSample;
use crate::element::Element;
use crate::packet::PacketMeta;
use crate::qdisc::AqmStats;
use crate::table::{Cell, Kind, Schema, Table};
use crate::time::Instant;
use crate::topology::Network;
use crate::units::Rate;

use Kind::{Category, F64, I64, OptF64, OptI64, OptStr, Str};

/// `flows`: one row per TCP connection of the `[[flow]]` workload (each copy of an entry),
/// in both engines. The simulator reads its own endpoints; the emulator its sockets (the
/// bytes its programs wrote and read, and the client socket's `struct tcp_info`, read with
/// `getsockopt(TCP_INFO)` when the connection ends or the run does). A column the kernel
/// keeps no per-connection count of is 0 in the emulator, as said below.
///
/// | column | meaning | emulator |
/// |---|---|---|
/// | `flow`, `label`, `entry`, `copy` | connection index (entries in file order, copies in turn); the label is unique per run (`config::connection_labels`: the entry's `label` or `from->to`, numbered `#n` where several connections would share it); entry index and copy number | same |
/// | `src`, `dst`, `app` | client host, server host, application | same |
/// | `cc` | the client's congestion controller | the client socket's `TCP_CONGESTION` |
/// | `start_s` | when the client opened the connection | when its `connect` was issued (the configured start, plus the workload thread's wake-up lateness) |
/// | `end_s` | end of the flow's measuring window: its `stop`, or the end of the run, whichever is first | same |
/// | `bytes_delivered` | bytes the server application read (request/response and replay: plus what the client read), counted until `stop` | bytes its programs read, counted the same way |
/// | `goodput_bps` | `bytes_delivered` over the time the flow was active ([`goodput_bps`]): until `start_s + completion_s` when it completed, else until `end_s` | same |
/// | `bytes_sent` | the client's payload bytes sent, retransmissions included | `tcpi_bytes_sent` |
/// | `segments_sent` | the client's segments, pure ACKs and SYN/FIN included | `tcpi_segs_out` |
/// | `retransmits` | the client's retransmitted segments | `tcpi_total_retrans` (SYN retransmissions included) |
/// | `fast_retransmits` | recoveries started by duplicate ACKs or SACK | 0: the kernel counts them per namespace (`TCPFastRetrans`), not per socket |
/// | `timeouts` | retransmission-timer expiries, SYN timeouts included | `tcpi_total_rto` (Linux ≥ 6.7; 0 before) |
/// | `lost_retransmissions` | retransmissions found lost and sent again without a timeout | 0: no per-socket count |
/// | `tail_loss_probes` | tail loss probes sent | 0: counted per namespace (`TCPLossProbes`), not per socket |
/// | `ecn_reductions` | responses to ECN-Echo | 0: no per-socket count |
/// | `ce_received` | CE-marked data segments the server received | 0: no per-socket count under RFC 3168 ECN |
/// | `rtt_min_ms` | the client's smallest RTT sample | `tcpi_min_rtt` |
/// | `rtt_mean_ms` | mean of the client's RTT samples | mean of the client's smoothed RTT (`tcpi_rtt`) read every `[run] sample_interval` and at the end: the kernel exposes no individual samples |
/// | `completion_s` | a sized bulk transfer: from `start_s` until the server had read it whole (NaN otherwise; a replay: until both ends closed) | same |
/// | `responses`, `response_time_mean_s` | request/response and replay exchanges completed, and their mean time from writing the request to reading the last response byte | same, timed by the emulator's programs |
pub const FLOWS: Schema = &[
    ("flow", I64),
    ("label", Str),
    ("entry", I64),
    ("copy", I64),
    ("src", Str),
    ("dst", Str),
    ("app", Str),
    ("cc", Str),
    ("start_s", F64),
    ("end_s", F64),
    ("bytes_delivered", I64),
    ("goodput_bps", F64),
    ("bytes_sent", I64),
    ("segments_sent", I64),
    ("retransmits", I64),
    ("fast_retransmits", I64),
    ("timeouts", I64),
    ("lost_retransmissions", I64),
    ("tail_loss_probes", I64),
    ("ecn_reductions", I64),
    ("ce_received", I64),
    ("rtt_min_ms", F64),
    ("rtt_mean_ms", F64),
    ("completion_s", F64),
    ("responses", I64),
    ("response_time_mean_s", F64),
];

/// `flow_series`: every flow's sender every `[run] sample_interval`. `goodput_bps` is the
/// bytes read since the previous sample per second; `delivered_bytes` and `retransmits` are
/// totals so far; `ssthresh_bytes` is `i64::MAX` before the first loss.
pub const FLOW_SERIES: Schema = &FLOW_SERIES_COLUMNS;

const FLOW_SERIES_COLUMNS: [(&str, Kind); 9] = [
    ("time_s", F64),
    ("flow", I64),
    ("label", Category),
    ("cwnd_bytes", I64),
    ("ssthresh_bytes", I64),
    ("srtt_ms", F64),
    ("goodput_bps", F64),
    ("delivered_bytes", I64),
    ("retransmits", I64),
];

/// The emulator's `flow_series`: [`FLOW_SERIES`]'s columns from every sending TCP socket's
/// `tcp_info` (cwnd and ssthresh as segments × `snd_mss`), then the kernel's own fields,
/// null where the kernel does not report them (see `pathtwin_emu::sampler`).
pub const KERNEL_FLOW_SERIES: Schema = &concat::<9, 20, 29>(
    FLOW_SERIES_COLUMNS,
    [
        ("src", Category),
        ("dst", Category),
        ("src_port", I64),
        ("dst_port", I64),
        ("cc", OptStr),
        ("state", I64),
        ("ca_state", OptI64),
        ("rto_retransmits", OptI64),
        ("rttvar_ms", OptF64),
        ("min_rtt_ms", OptF64),
        ("rto_ms", OptF64),
        ("mss", OptI64),
        ("cwnd_segments", OptI64),
        ("unacked_segments", OptI64),
        ("lost_segments", OptI64),
        ("delivery_rate_bps", OptF64),
        ("pacing_rate_bps", OptF64),
        ("bytes_sent", OptI64),
        ("bytes_retrans", OptI64),
        ("bytes_received", OptI64),
    ],
);

/// A shared table's columns followed by an engine's own: `N = A + B` (checked when the
/// constant is evaluated).
const fn concat<const A: usize, const B: usize, const N: usize>(shared: [(&'static str, Kind); A], own: [(&'static str, Kind); B]) -> [(&'static str, Kind); N] {
    assert!(A + B == N, "the extended schema's length is the sum of its parts");
    let mut out = [("", F64); N];
    let mut i = 0;
    while i < A {
        out[i] = shared[i];
        i += 1;
    }
    while i < N {
        out[i] = own[i - A];
        i += 1;
    }
    out
}

/// `queues`: one row per bandwidth queue (pipes' queues excluded), its totals at the end.
/// Real and placeholder traffic are counted apart; `utilization` is the real bytes that left
/// over what the capacity could carry in the run; the AQM columns split drops into early and
/// forced (every drop is forced without an active queue manager), and count per drop
/// precedence (RIO/FRIO's IN and OUT; unmarked traffic is IN; zeros for other disciplines).
pub const QUEUES: Schema = &[
    ("queue", Str),
    ("qdisc", Str),
    ("capacity_bps", F64),
    ("abw_bps", F64),
    ("limit", Str),
    ("arrivals", I64),
    ("departures", I64),
    ("drops", I64),
    ("arrival_bytes", I64),
    ("departure_bytes", I64),
    ("final_packets", I64),
    ("placeholder_arrivals", I64),
    ("placeholder_departures", I64),
    ("placeholder_drops", I64),
    ("placeholder_share", F64),
    ("utilization", F64),
    ("early_drops", I64),
    ("forced_drops", I64),
    ("ecn_marks", I64),
    ("in_arrivals", I64),
    ("out_arrivals", I64),
    ("in_drops", I64),
    ("out_drops", I64),
];

/// `queue_series`: every bandwidth queue every `[run] sample_interval` (see
/// [`QueueSample`]): occupancy, drops since the previous sample, bytes departed so far,
/// ABW, active foreground flows and RED's average queue (NaN for other disciplines).
pub const QUEUE_SERIES: Schema = &[
    ("time_s", F64),
    ("queue", Category),
    ("packets", I64),
    ("bytes", I64),
    ("placeholder_packets", I64),
    ("placeholder_bytes", I64),
    ("drops", I64),
    ("departed_bytes", I64),
    ("abw_bps", F64),
    ("active_flows", I64),
    ("avg_queue", F64),
];

/// `markers`: one row per `[[marker]]`: IN (green) and OUT (yellow + red) packets and bytes,
/// each colour, and the packets the TCP-friendly marker protected. A two-colour policy
/// (token bucket, TCP-friendly) has no yellow.
pub const MARKERS: Schema = &[
    ("marker", Str),
    ("kind", Str),
    ("in_packets", I64),
    ("in_bytes", I64),
    ("out_packets", I64),
    ("out_bytes", I64),
    ("green_packets", I64),
    ("green_bytes", I64),
    ("yellow_packets", I64),
    ("yellow_bytes", I64),
    ("red_packets", I64),
    ("red_bytes", I64),
    ("protected_packets", I64),
];

/// `pipes`: one row per `[[pipe]]`: its client and server hosts and the client address its
/// connections come from (a capture is read pipe by pipe through it).
pub const PIPES: Schema = &PIPES_COLUMNS;

const PIPES_COLUMNS: [(&str, Kind); 4] = [("pipe", I64), ("client", Str), ("server", Str), ("address", Str)];

/// The emulator's `pipes`: [`PIPES`]'s columns, then packets into and out of each direction
/// (`_down` from the server) and the drops of its queue and of its random loss.
pub const EMU_PIPES: Schema = &concat::<4, 8, 12>(
    PIPES_COLUMNS,
    [
        ("packets_in_down", I64),
        ("packets_in_up", I64),
        ("packets_out_down", I64),
        ("packets_out_up", I64),
        ("queue_drops_down", I64),
        ("queue_drops_up", I64),
        ("loss_drops_down", I64),
        ("loss_drops_up", I64),
    ],
);

/// `probes`: one row per datagram of a `[[probe]]` series (simulator): the entry, its
/// hosts, the probe's number in its series, when it left `src`, when it reached `dst` and
/// when its echo was back at `src` (integer nanoseconds of the run's clock; null when the
/// probe, or its echo, was lost). One clock at both ends: `arrived_ns − sent_ns` is the
/// one-way delay itself.
pub const PROBES: Schema = &[
    ("probe", I64),
    ("src", Category),
    ("dst", Category),
    ("round", I64),
    ("sent_ns", I64),
    ("arrived_ns", OptI64),
    ("echoed_ns", OptI64),
];

/// The emulator's `packet_flows`: every transport flow (one direction of a 5-tuple) that
/// crossed it, from its first to its last packet: packets and bytes into the model and out of
/// it to the destination (IP bytes, and payload), and the hosts of the route it took. A
/// 5-tuple silent for over two minutes that sends again starts a second row, as a flow
/// exporter's inactive timeout does (`pathtwin-emu`'s `flow_records`).
pub const PACKET_FLOWS: Schema = &[
    ("src", Str),
    ("dst", Str),
    ("proto", I64),
    ("src_port", I64),
    ("dst_port", I64),
    ("route_src", Str),
    ("route_dst", Str),
    ("first_ns", I64),
    ("last_ns", I64),
    ("packets_in", I64),
    ("bytes_in", I64),
    ("payload_bytes_in", I64),
    ("packets_out", I64),
    ("bytes_out", I64),
    ("payload_bytes_out", I64),
];

/// The emulator's `routes`: per routed host pair, packets and bytes in and out, and writes
/// to the destination's device that failed.
pub const ROUTES: Schema = &[
    ("src", Str),
    ("dst", Str),
    ("packets_in", I64),
    ("bytes_in", I64),
    ("packets_out", I64),
    ("bytes_out", I64),
    ("write_drops", I64),
];

/// The emulator's `timing`: release lateness (model departure to the write) and timer-wake
/// lateness (deadline to the loop running) over the run.
pub const TIMING: Schema = &[
    ("kind", Str),
    ("count", I64),
    ("mean_ns", F64),
    ("p50_ns", I64),
    ("p99_ns", I64),
    ("p999_ns", I64),
    ("max_ns", I64),
];

/// Every table a run directory may hold: (engine, table name, schema). A table name means
/// the same thing in both engines; where an engine measures more, its schema extends the
/// shared one.
pub const TABLES: &[(&str, &str, Schema)] = &[
    ("sim", "flows", FLOWS),
    ("sim", "flow_series", FLOW_SERIES),
    ("sim", "queues", QUEUES),
    ("sim", "queue_series", QUEUE_SERIES),
    ("sim", "markers", MARKERS),
    ("sim", "pipes", PIPES),
    ("sim", "probes", PROBES),
    ("emu", "flows", FLOWS),
    ("emu", "flow_series", KERNEL_FLOW_SERIES),
    ("emu", "queues", QUEUES),
    ("emu", "queue_series", QUEUE_SERIES),
    ("emu", "markers", MARKERS),
    ("emu", "pipes", EMU_PIPES),
    ("emu", "packet_flows", PACKET_FLOWS),
    ("emu", "routes", ROUTES),
    ("emu", "timing", TIMING),
];

/// The schema of table `name` as engine `engine` ("sim" or "emu") writes it.
pub fn schema(engine: &str, name: &str) -> Option<Schema> {
    TABLES.iter().find(|(e, n, _)| *e == engine && *n == name).map(|(_, _, s)| *s)
}

/// An `i64` cell from a counter (counts stay far below 2^63).
/// A flow's `goodput_bps`: the bytes it delivered over the time it was active, from `start`
/// until it completed (a sized transfer read whole, a replay closed) or else until `end`
/// (its `stop`, or the end of the run). Over the whole run, an 8 MB transfer done at 20 s of
/// a 40-s run would read half its rate.
pub fn goodput_bps(delivered_bytes: u64, start: Instant, end: Instant, completed: Option<Instant>) -> f64 {
    let until = completed.map_or(end, |c| c.min(end));
    let active = until.saturating_since(start).as_secs_f64();
    if active > 0.0 {
        delivered_bytes as f64 * 8.0 / active
    } else {
        0.0
    }
}

fn count(n: u64) -> Cell<'static> {
    Cell::I(n as i64)
}

/// The `queues` table of `net` at `now` (time zero being the start of the run).
pub fn queues<P: PacketMeta + Send + Sync + 'static>(net: &Network<P>, now: Instant) -> Table {
    let mut t = Table::new(QUEUES);
    for e in net.queue_ids() {
        let Element::Queue(q) = &net.elements[e] else { continue };
        let s = q.stats();
        let capacity_bytes = Rate::bytes_in(q.capacity(), now - Instant::ZERO) as f64;
        // Without an active queue manager every drop is a tail drop.
        let aqm = q.aqm_stats().unwrap_or(AqmStats { forced_drops: s.drops, ..Default::default() });
        t.push(vec![
            Cell::T(&net.element_info[e].name),
            Cell::T(q.qdisc_name()),
            Cell::F(q.capacity().as_f64()),
            Cell::F(q.abw().as_f64()),
            Cell::S(q.limit().to_string()),
            count(s.arrivals),
            count(s.departures),
            count(s.drops),
            count(s.arrival_bytes),
            count(s.departure_bytes),
            count(q.occupancy().packets),
            count(s.placeholder_arrivals),
            count(s.placeholder_departures),
            count(s.placeholder_drops),
            Cell::F(q.placeholder_share()),
            Cell::F(if capacity_bytes > 0.0 { s.departure_bytes as f64 / capacity_bytes } else { 0.0 }),
            count(aqm.early_drops),
            count(aqm.forced_drops),
            count(aqm.ecn_marks),
            count(aqm.in_class.arrivals),
            count(aqm.out_class.arrivals),
            count(aqm.in_class.drops()),
            count(aqm.out_class.drops()),
        ]);
    }
    t
}

/// The `markers` table of `net`: what each marker decided. IN is green and OUT is yellow
/// plus red.
pub fn markers<P: PacketMeta + Send + Sync + 'static>(net: &Network<P>) -> Table {
    let mut t = Table::new(MARKERS);
    for e in net.marker_ids() {
        let Element::Marker(m) = &net.elements[e] else { continue };
        let s = m.stats();
        t.push(vec![
            Cell::T(&net.element_info[e].name),
            Cell::T(m.kind()),
            count(s.in_packets()),
            count(s.in_bytes()),
            count(s.out_packets()),
            count(s.out_bytes()),
            count(s.green_packets),
            count(s.green_bytes),
            count(s.yellow_packets),
            count(s.yellow_bytes),
            count(s.red_packets),
            count(s.red_bytes),
            count(s.protected_packets),
        ]);
    }
    t
}

/// Appends `sample` of the queue called `name` to a [`QUEUE_SERIES`] table.
pub fn push_queue_sample(t: &mut Table, s: &QueueSample, name: &str) {
    t.push(vec![
        Cell::F(Instant::from_nanos(s.t_ns).as_secs_f64()),
        Cell::T(name),
        count(s.packets),
        count(s.bytes),
        count(s.placeholder_packets),
        count(s.placeholder_bytes),
        count(s.drops),
        count(s.departed_bytes),
        Cell::F(s.abw_bps),
        count(s.active_flows),
        Cell::F(s.avg_queue),
    ]);
}

/// The shared columns of `pipes` row `g`: pipe `g` of `net`, whose client address is
/// `address`; an engine with more to say (the emulator) appends its own cells.
pub fn push_pipe<'a, P>(row: &mut Vec<Cell<'a>>, net: &'a Network<P>, g: usize, address: String) {
    let p = &net.pipes[g];
    row.extend([Cell::I(g as i64), Cell::T(&net.hosts[p.client]), Cell::T(&net.hosts[p.server]), Cell::S(address)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every schema names each column once.
    #[test]
    fn column_names_are_unique_within_each_table() {
        for (_, _, schema) in TABLES {
            let mut names: Vec<&str> = schema.iter().map(|(n, _)| *n).collect();
            names.sort_unstable();
            let before = names.len();
            names.dedup();
            assert_eq!(names.len(), before, "{schema:?}");
        }
    }

    /// A table both engines write has one schema, or the emulator's extends the
    /// simulator's: its first columns are the simulator's, name for name and type for type.
    #[test]
    fn a_table_name_means_one_schema_in_both_engines() {
        for (_, name, emu) in TABLES.iter().filter(|(e, _, _)| *e == "emu") {
            if let Some(sim) = schema("sim", name) {
                assert_eq!(&emu[..sim.len()], sim, "{name}");
            }
        }
    }
}
