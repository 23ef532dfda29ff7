//! The output rows: one [`ConnRecord`] per connection, one [`ExchangeRecord`] per
//! request/response exchange and one [`CrossTrafficRecord`] per bin of a direction's
//! cross-traffic profile, and their columnar form.
//!
//! Owns the names, units and meaning of every output column (the replay database of Monkey
//! See: the connection table holds the path and endpoint parameters, the exchange table the
//! workload a replay re-creates), and Monkey's pruning rule (§3.2: incomplete handshake,
//! termination or sequence, or no ACK pair to estimate bandwidth from). Column names carry
//! their unit; times are seconds since the Unix epoch, durations milliseconds, rates bits per
//! second.

use crate::conn::{Conn, Termination, DOWN, UP};
use crate::direction;

/// Why Monkey See would not replay a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prune {
    IncompleteHandshake,
    IncompleteTermination,
    IncompleteSequence,
    NoAckPairs,
}

impl Prune {
    pub fn as_str(self) -> &'static str {
        match self {
            Prune::IncompleteHandshake => "incomplete handshake",
            Prune::IncompleteTermination => "incomplete termination",
            Prune::IncompleteSequence => "incomplete sequence",
            Prune::NoAckPairs => "no usable ACK pairs",
        }
    }
}

/// A column of values, one per row.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    U64(Vec<u64>),
    F64(Vec<Option<f64>>),
    Str(Vec<Option<String>>),
    Bool(Vec<bool>),
}

/// Defines a row type, the function turning rows into columns and the list of column names
/// from one table, so names cannot drift.
macro_rules! record {
    (
        $(#[doc = $row_doc:literal])* struct $row:ident;
        fn $to_columns:ident; const $columns:ident;
        { $( $(#[doc = $doc:literal])* $name:ident : $kind:ident ),* $(,)? }
    ) => {
        $(#[doc = $row_doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $row {
            $( $(#[doc = $doc])* pub $name: record!(@ty $kind), )*
        }

        /// The rows as named columns, in declaration order.
        pub fn $to_columns(rows: &[$row]) -> Vec<(&'static str, Column)> {
            vec![$( (stringify!($name), Column::$kind(rows.iter().map(|r| r.$name.clone()).collect())), )*]
        }

        /// Column names in order.
        pub const $columns: &[&str] = &[$( stringify!($name), )*];
    };
    (@ty U64) => { u64 };
    (@ty F64) => { Option<f64> };
    (@ty Str) => { Option<String> };
    (@ty Bool) => { bool };
}

record! {
    /// One connection's row.
    struct ConnRecord;
    fn to_columns; const COLUMNS;
    {
    /// Order of first appearance in the capture.
    conn_id: U64,
    client_ip: Str,
    client_port: U64,
    server_ip: Str,
    server_port: U64,
    /// Whether client and server come from a SYN or `--server` (else: lower port is server).
    roles_known: Bool,
    start_s: F64,
    end_s: F64,
    duration_ms: F64,
    /// "fin", "rst" or "incomplete".
    termination: Str,
    handshake_complete: Bool,
    /// Kept for replay by Monkey's rules; otherwise `prune_reason` says why not.
    kept: Bool,
    prune_reason: Str,
    /// MSS option of the client's SYN: the downstream path MTU less headers.
    mss_client: F64,
    mss_server: F64,
    wscale_client: F64,
    wscale_server: F64,
    sack_permitted: Bool,
    timestamps: Bool,
    /// SYN-ACK to the client's ACK (Monkey's min RTT source), if the SYN-ACK was sent once.
    handshake_rtt_ms: F64,
    /// SYN to the server's answer (SYN-ACK, or the RST-ACK of a refused connection): the
    /// capture point to server part of the RTT.
    syn_rtt_ms: F64,
    /// Smallest of the handshake RTT and the Karn samples.
    min_rtt_ms: F64,
    rtt_samples: U64,
    rtt_median_ms: F64,
    rtt_mean_ms: F64,
    rtt_max_ms: F64,
    packets_c2s: U64,
    packets_s2c: U64,
    data_packets_c2s: U64,
    data_packets_s2c: U64,
    bytes_c2s: U64,
    bytes_s2c: U64,
    unique_bytes_c2s: U64,
    unique_bytes_s2c: U64,
    retrans_packets_c2s: U64,
    retrans_packets_s2c: U64,
    /// Bytes of retransmitted segments already seen (SYN and FIN count one each, as in
    /// tcptrace's "rexmt data bytes").
    retrans_bytes_c2s: U64,
    retrans_bytes_s2c: U64,
    /// Downstream retransmissions shown unnecessary (D-SACK or Monkey's duplicate ACK test).
    spurious_retrans: U64,
    /// "dsack" or "dupack": which test `spurious_retrans` used.
    spurious_method: Str,
    /// (retransmissions − spurious) / server data packets.
    loss_rate: F64,
    /// Retransmissions a drop-tail queue of Monkey's pipe size at `bottleneck_bps` explains
    /// (`Conn::queue_explained_losses`; first 1024 segments).
    queue_losses: U64,
    /// `loss_rate` without those: the random loss a replay pipe adds to its own queue's.
    random_loss_rate: F64,
    /// The downstream transmissions the capture shows lost, as byte offsets from the
    /// server's first payload byte, ascending, an offset once per lost transmission,
    /// space-separated: retransmissions less spurious ones, queue overflows included
    /// (`losses`; a replay pipe's `drop`, ahead of its queue). Empty: none lost; null: no
    /// server SYN to count from.
    lost_offsets_s2c: Str,
    bottleneck_bps: F64,
    bandwidth_samples: U64,
    /// Server data packets per client ACK before the first loss.
    ack_ratio: F64,
    /// "quick" (an ACK per packet) or "delayed".
    delayed_ack: Str,
    delayed_ack_timeout_ms: F64,
    /// Client window of the first request packet, scaled, in bytes.
    rwin_bytes: F64,
    /// Largest client window after the handshake, scaled, in bytes (above `rwin_bytes`
    /// when the client's buffer grew: autotuning, not a fixed small buffer).
    rwin_max_bytes: F64,
    requests: U64,
    http_method: Str,
    http_status: F64,
    request_start_s: F64,
    request_end_s: F64,
    response_start_s: F64,
    response_end_s: F64,
    /// First request byte to last response byte (Monkey §5.1).
    response_time_ms: F64,
    /// Last request packet to first response packet.
    server_delay_ms: F64,
    /// First response packet to the first result packet (Monkey's header/results split).
    query_delay_ms: F64,
    timeouts: U64,
    /// Shortest wait before a timeout retransmission: the sender's RTO at its smallest.
    rto_min_ms: F64,
    // Per-direction path estimates (`direction`), for `trace to-paths`: server to client
    // seen at the sender, client to server at the receiver (client TCP timestamps needed
    // for its delays and pairs). Rates count IP bytes, as a link does.
    /// Capacity: same-burst ACK pairs before the first retransmission, least squares over
    /// their bursts (1/C = Σ bits·span / Σ bits²).
    capacity_s2c_bps: F64,
    /// Standard error of `capacity_s2c_bps` (two bursts or more), for jitter after the
    /// bottleneck that is independent of the flow.
    capacity_s2c_se_bps: F64,
    /// Bound on the bias of jitter locked to the flow (every burst's last ACK delayed alike
    /// by periodic reverse traffic): the spread of the pairs' gaps over the bursts' lengths.
    capacity_s2c_bias_bps: F64,
    capacity_s2c_pairs: U64,
    capacity_s2c_bursts: U64,
    /// Σ bits² over the bursts: the estimate's least-squares weight, to pool connections
    /// (1/C = Σ weight/C_i / Σ weight).
    capacity_s2c_weight: F64,
    /// ABW: delivery rate over rounds whose every RTT sample showed a standing queue, when
    /// its error bound (Σ queue backlog at capacity / busy time) is within 25 % of it.
    abw_s2c_bps: F64,
    abw_s2c_error_bps: F64,
    /// Time in those standing-queue rounds.
    busy_s2c_ms: F64,
    /// Delivery rate over the whole transfer (first to last acknowledgment).
    throughput_s2c_bps: F64,
    /// Lower bound on ABW: the throughput less a queue's backlog over its duration (or a
    /// busy estimate less its error, if larger).
    abw_s2c_floor_bps: F64,
    /// Largest clean RTT sample above the min RTT, less the segment's own transmission at
    /// capacity: the bottleneck queue at its fullest seen (× capacity: bytes).
    queue_delay_s2c_ms: F64,
    /// What limited the transfer: "network" (ABW is a point estimate), "receiver window",
    /// "application", "loss", "slow start" or "none" (no data).
    limit_s2c: Str,
    /// Shares of rounds in which new data filled the client's window / in which the server
    /// started a burst on its own.
    rwnd_limited_s2c: F64,
    app_limited_s2c: F64,
    /// Retransmissions with the queue near its fullest (a model's queue drops those itself).
    congestion_losses_s2c: U64,
    /// (retransmissions − spurious − congestion losses) / server data packets: the random
    /// loss of a path model.
    noncongestion_loss_s2c: F64,
    /// Capacity: consecutive client segments with the same TSval before the first upstream
    /// loss, as server to client.
    capacity_c2s_bps: F64,
    capacity_c2s_se_bps: F64,
    capacity_c2s_bias_bps: F64,
    capacity_c2s_pairs: U64,
    capacity_c2s_bursts: U64,
    capacity_c2s_weight: F64,
    /// ABW, as server to client but from the arrival of client bytes and their one-way delay.
    abw_c2s_bps: F64,
    abw_c2s_error_bps: F64,
    busy_c2s_ms: F64,
    throughput_c2s_bps: F64,
    abw_c2s_floor_bps: F64,
    /// Largest one-way delay above the smallest (the client's 1-ms timestamp clock).
    queue_delay_c2s_ms: F64,
    limit_c2s: Str,
    rwnd_limited_c2s: F64,
    app_limited_c2s: F64,
    /// Client segments lost before the capture point: holes in the client's stream filled
    /// by a retransmission (not by a reordered original).
    lost_packets_c2s: U64,
    congestion_losses_c2s: U64,
    /// (lost − congestion losses) / client data packets.
    noncongestion_loss_c2s: F64,
    }
}

record! {
    /// One request/response exchange's row: what a replay sends and waits for.
    struct ExchangeRecord;
    fn exchange_columns; const EXCHANGE_COLUMNS;
    {
    /// The connection's `conn_id` in the connection table.
    conn_id: U64,
    /// Index of the exchange within its connection, from 0.
    exchange: U64,
    request_start_s: F64,
    request_end_s: F64,
    /// New client payload bytes (retransmitted bytes count once).
    request_bytes: U64,
    response_start_s: F64,
    response_end_s: F64,
    /// New server payload bytes (retransmitted bytes count once).
    response_bytes: U64,
    /// Response bytes before the first result segment (Monkey's header/results split);
    /// missing when the walk found no split.
    header_bytes: F64,
    /// Last request packet to first response packet.
    server_delay_ms: F64,
    /// First response packet to the first result packet.
    query_delay_ms: F64,
    /// First request byte to last response byte (Monkey §5.1).
    response_time_ms: F64,
    /// The previous exchange's last response byte to this request's first byte: the
    /// client's think time; missing for the first exchange.
    think_ms: F64,
    /// The first client ACK covering the whole response (missing if none was captured).
    response_acked_s: F64,
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl ConnRecord {
    /// Builds the row of a finished connection.
    pub fn from_conn(c: &Conn) -> ConnRecord {
        let up = &c.half[UP];
        let down = &c.half[DOWN];
        let d = &c.down;
        let termination = c.termination();
        let (bw, bw_n) = c.bandwidth();
        let spurious = d.dsack_blocks + d.dupack_spurious;
        let sack_on = up.sack_permitted && down.sack_permitted;
        let loss_rate = (down.data_packets > 0).then(|| {
            down.retrans_packets.saturating_sub(spurious) as f64 / down.data_packets as f64
        });
        let queue_losses = bw.map_or(0, |b| c.queue_explained_losses(b));
        // The stream is anchored at the SYN when it was seen: its first payload byte is one on.
        let lost_offsets = (down.syn_count > 0).then(|| {
            let offsets = d.losses.offsets(crate::seq::ORIGIN + 1, c.downstream_mss() as u64);
            offsets.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
        });
        let ack_ratio = (d.pre_loss_acks > 0).then(|| d.pre_loss_data as f64 / d.pre_loss_acks as f64);
        let first = c.exchanges.first();
        let prune = if !c.handshake_complete {
            Some(Prune::IncompleteHandshake)
        } else if termination == Termination::Incomplete {
            Some(Prune::IncompleteTermination)
        } else if !up.sequence_complete() || !down.sequence_complete() {
            Some(Prune::IncompleteSequence)
        } else if bw_n == 0 {
            Some(Prune::NoAckPairs)
        } else {
            None
        };
        let opt = |v: Option<u64>| v.map(|x| x as f64);
        let s2c = direction::estimate(&d.cap, &d.rounds(), d.max_wire as f64 * 8.0, direction::Delays::Rtt);
        // One-way delays from the client's timestamps are good to a 1-ms tick.
        let c2s = direction::estimate(&c.up.cap, &c.up.rounds, c.up.max_wire as f64 * 8.0, direction::Delays::OneWay { tick_s: 1e-3 });
        let per_packet = |n: u64, packets: u64| (packets > 0).then(|| n as f64 / packets as f64);
        ConnRecord {
            conn_id: c.index,
            client_ip: Some(c.client.0.to_string()),
            client_port: c.client.1 as u64,
            server_ip: Some(c.server.0.to_string()),
            server_port: c.server.1 as u64,
            roles_known: c.roles_known,
            start_s: Some(secs(c.first_ns)),
            end_s: Some(secs(c.last_ns)),
            duration_ms: Some(ms(c.last_ns.saturating_sub(c.first_ns))),
            termination: Some(
                match termination {
                    Termination::Fin => "fin",
                    Termination::Rst => "rst",
                    Termination::Incomplete => "incomplete",
                }
                .into(),
            ),
            handshake_complete: c.handshake_complete,
            kept: prune.is_none(),
            prune_reason: prune.map(|p| p.as_str().into()),
            mss_client: up.mss.map(f64::from),
            mss_server: down.mss.map(f64::from),
            wscale_client: up.wscale.map(f64::from),
            wscale_server: down.wscale.map(f64::from),
            sack_permitted: sack_on,
            timestamps: up.timestamps && down.timestamps,
            handshake_rtt_ms: c.handshake_rtt_ns.map(ms),
            syn_rtt_ms: c.syn_rtt_ns.map(ms),
            min_rtt_ms: c.min_rtt_ns().map(ms),
            rtt_samples: d.rtt.count(),
            rtt_median_ms: d.rtt.median().map(|x| x / 1e6),
            rtt_mean_ms: d.rtt.mean().map(|x| x / 1e6),
            rtt_max_ms: d.rtt.max().map(|x| x / 1e6),
            packets_c2s: up.packets,
            packets_s2c: down.packets,
            data_packets_c2s: up.data_packets,
            data_packets_s2c: down.data_packets,
            bytes_c2s: up.payload_bytes,
            bytes_s2c: down.payload_bytes,
            unique_bytes_c2s: up.unique_bytes,
            unique_bytes_s2c: down.unique_bytes,
            retrans_packets_c2s: up.retrans_packets,
            retrans_packets_s2c: down.retrans_packets,
            retrans_bytes_c2s: up.retrans_bytes,
            retrans_bytes_s2c: down.retrans_bytes,
            spurious_retrans: spurious,
            spurious_method: Some(if sack_on { "dsack" } else { "dupack" }.into()),
            loss_rate,
            queue_losses,
            random_loss_rate: loss_rate.map(|_| {
                down.retrans_packets.saturating_sub(spurious).saturating_sub(queue_losses) as f64 / down.data_packets as f64
            }),
            lost_offsets_s2c: lost_offsets,
            bottleneck_bps: bw,
            bandwidth_samples: bw_n,
            ack_ratio,
            delayed_ack: ack_ratio.map(|r| if r < 1.5 { "quick" } else { "delayed" }.into()),
            delayed_ack_timeout_ms: d.delack.median().map(|x| x / 1e6),
            rwin_bytes: opt(c.request_rwin),
            rwin_max_bytes: (c.client_rwin_max > 0).then_some(c.client_rwin_max as f64),
            requests: c.exchanges.len() as u64,
            http_method: c.http_method.clone(),
            http_status: c.http_status.map(f64::from),
            request_start_s: first.map(|x| secs(x.request_start_ns)),
            request_end_s: first.map(|x| secs(x.request_end_ns)),
            response_start_s: first.and_then(|x| x.response_start_ns).map(secs),
            response_end_s: first.and_then(|x| x.response_end_ns).map(secs),
            response_time_ms: first.and_then(|x| Some(ms(x.response_end_ns?.saturating_sub(x.request_start_ns)))),
            server_delay_ms: first.and_then(|x| Some(ms(x.response_start_ns?.saturating_sub(x.request_end_ns)))),
            query_delay_ms: first.and_then(|x| x.query_delay_ns).map(ms),
            timeouts: d.timeouts,
            rto_min_ms: d.timeout_min_ns.map(ms),
            capacity_s2c_bps: s2c.capacity.map(|e| e.rate_bps),
            capacity_s2c_se_bps: s2c.capacity.and_then(|e| e.se_bps),
            capacity_s2c_bias_bps: s2c.capacity.map(|e| e.bias_bps),
            capacity_s2c_pairs: d.cap.pairs(),
            capacity_s2c_bursts: s2c.capacity.map_or(0, |e| e.bursts),
            capacity_s2c_weight: s2c.capacity.map(|e| e.weight),
            abw_s2c_bps: s2c.abw_bps,
            abw_s2c_error_bps: s2c.abw_error_bps,
            busy_s2c_ms: Some(s2c.busy_s * 1e3),
            throughput_s2c_bps: s2c.throughput_bps,
            abw_s2c_floor_bps: s2c.abw_floor_bps,
            queue_delay_s2c_ms: s2c.queue_delay_s.map(|q| q * 1e3),
            limit_s2c: Some(s2c.limit.as_str().into()),
            rwnd_limited_s2c: s2c.rwnd_share,
            app_limited_s2c: s2c.app_share,
            congestion_losses_s2c: s2c.congestion_losses,
            noncongestion_loss_s2c: per_packet(
                down.retrans_packets.saturating_sub(spurious).saturating_sub(s2c.congestion_losses),
                down.data_packets,
            ),
            capacity_c2s_bps: c2s.capacity.map(|e| e.rate_bps),
            capacity_c2s_se_bps: c2s.capacity.and_then(|e| e.se_bps),
            capacity_c2s_bias_bps: c2s.capacity.map(|e| e.bias_bps),
            capacity_c2s_pairs: c.up.cap.pairs(),
            capacity_c2s_bursts: c2s.capacity.map_or(0, |e| e.bursts),
            capacity_c2s_weight: c2s.capacity.map(|e| e.weight),
            abw_c2s_bps: c2s.abw_bps,
            abw_c2s_error_bps: c2s.abw_error_bps,
            busy_c2s_ms: Some(c2s.busy_s * 1e3),
            throughput_c2s_bps: c2s.throughput_bps,
            abw_c2s_floor_bps: c2s.abw_floor_bps,
            queue_delay_c2s_ms: c2s.queue_delay_s.map(|q| q * 1e3),
            limit_c2s: Some(c2s.limit.as_str().into()),
            rwnd_limited_c2s: c2s.rwnd_share,
            app_limited_c2s: c2s.app_share,
            lost_packets_c2s: c2s.losses,
            congestion_losses_c2s: c2s.congestion_losses,
            noncongestion_loss_c2s: per_packet(c2s.losses.saturating_sub(c2s.congestion_losses), up.data_packets),
        }
    }
}

record! {
    /// One bin of a connection direction's cross traffic over time (iBox, SIGMETRICS 2022;
    /// [`direction::cross_traffic`]): what of the capacity the connection did not get while
    /// the bottleneck's queue stood.
    struct CrossTrafficRecord;
    fn cross_traffic_columns; const CROSS_TRAFFIC_COLUMNS;
    {
    /// The connection's row in the connection table.
    conn_id: U64,
    /// `s2c` (server to client, seen at the sender) or `c2s` (at the receiver).
    direction: Str,
    /// Capture time of the bin's start (Unix epoch seconds) and its length.
    start_s: F64,
    duration_s: F64,
    /// Time of the bin in which the queue stood.
    busy_s: F64,
    capacity_bps: F64,
    /// The connection's delivery rate: over the busy time for a point, else the whole bin.
    foreground_bps: F64,
    /// Capacity − foreground: the cross traffic (a point), or an upper bound on it.
    cross_bps: F64,
    /// A point's error bound (the queue's backlog over the busy time); none for a bound.
    cross_error_bps: F64,
    /// Whether `cross_bps` is a point estimate (the queue stood through at least half the bin).
    point: Bool,
    }
}

/// Bins of a cross-traffic profile: a second, as iBoxNet's profiles have (made of whole
/// rounds, so a little longer).
pub const CROSS_TRAFFIC_BIN_NS: u64 = 1_000_000_000;

impl CrossTrafficRecord {
    /// The profile bins of a connection's two directions, server to client first.
    pub fn from_conn(c: &Conn) -> Vec<CrossTrafficRecord> {
        let d = &c.down;
        let s2c = direction::cross_traffic(&d.cap, &d.rounds(), d.max_wire as f64 * 8.0, direction::Delays::Rtt, CROSS_TRAFFIC_BIN_NS);
        let c2s = direction::cross_traffic(&c.up.cap, &c.up.rounds, c.up.max_wire as f64 * 8.0, direction::Delays::OneWay { tick_s: 1e-3 }, CROSS_TRAFFIC_BIN_NS);
        let capacity = [d.cap.estimate(), c.up.cap.estimate()].map(|e| e.map(|e| e.rate_bps));
        [("s2c", s2c, capacity[0]), ("c2s", c2s, capacity[1])]
            .into_iter()
            .flat_map(|(name, bins, cap)| {
                bins.into_iter().map(move |b| CrossTrafficRecord {
                    conn_id: c.index,
                    direction: Some(name.into()),
                    start_s: Some(secs(b.start_ns)),
                    duration_s: Some(secs(b.dur_ns)),
                    busy_s: Some(secs(b.busy_ns)),
                    capacity_bps: cap,
                    foreground_bps: Some(b.foreground_bps),
                    cross_bps: Some(b.cross_bps),
                    cross_error_bps: b.error_bps,
                    point: b.point,
                })
            })
            .collect()
    }
}

impl ExchangeRecord {
    /// The rows of a connection's exchanges, in order; `conn_id` is the connection's.
    pub fn from_conn(c: &Conn) -> impl Iterator<Item = ExchangeRecord> + '_ {
        let prev_end = std::iter::once(None).chain(c.exchanges.iter().map(|x| x.response_end_ns));
        c.exchanges.iter().zip(prev_end).enumerate().map(|(i, (x, prev_end))| ExchangeRecord {
            conn_id: c.index,
            exchange: i as u64,
            request_start_s: Some(secs(x.request_start_ns)),
            request_end_s: Some(secs(x.request_end_ns)),
            request_bytes: x.request_bytes,
            response_start_s: x.response_start_ns.map(secs),
            response_end_s: x.response_end_ns.map(secs),
            response_bytes: x.response_bytes,
            header_bytes: x.header_bytes.map(|b| b as f64),
            server_delay_ms: x.response_start_ns.map(|t| ms(t.saturating_sub(x.request_end_ns))),
            query_delay_ms: x.query_delay_ns.map(ms),
            response_time_ms: x.response_end_ns.map(|t| ms(t.saturating_sub(x.request_start_ns))),
            think_ms: prev_end.map(|t| ms(x.request_start_ns.saturating_sub(t))),
            response_acked_s: x.response_acked_ns.map(secs),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::tests::persistent;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    /// The exchange rows of `conn::tests::persistent`, against the times and sizes it was
    /// built with (ms since the capture's start).
    #[test]
    fn exchange_rows_carry_sizes_delays_and_think_time() {
        let c = persistent();
        let rows: Vec<_> = ExchangeRecord::from_conn(&c).collect();
        assert_eq!(rows.iter().map(|r| (r.conn_id, r.exchange)).collect::<Vec<_>>(), [(0, 0), (0, 1), (0, 2)]);
        let bytes: Vec<_> = rows.iter().map(|r| (r.request_bytes, r.response_bytes, r.header_bytes)).collect();
        assert_eq!(bytes, [(300, 6340, Some(2920.0)), (1500, 3920, None), (100, 2560, Some(300.0))]);
        // (server delay, query delay, response time, think time), in ms.
        let expected = [
            (30.0 - 10.0, Some(32.0), 62.2 - 10.0, None),
            (120.0 - 100.5, None, 120.2 - 100.0, Some(100.0 - 62.2)),
            (505.0 - 500.0, Some(0.3), 505.4 - 500.0, Some(500.0 - 120.2)),
        ];
        for (r, (server, query, response, think)) in rows.iter().zip(expected) {
            assert!(close(r.server_delay_ms, server), "{r:?}");
            assert_eq!(r.query_delay_ms.is_some(), query.is_some(), "{r:?}");
            assert!(query.map_or(true, |q| close(r.query_delay_ms, q)), "{r:?}");
            assert!(close(r.response_time_ms, response), "{r:?}");
            assert_eq!(r.think_ms.is_some(), think.is_some(), "{r:?}");
            assert!(think.map_or(true, |t| close(r.think_ms, t)), "{r:?}");
        }
        assert!(close(rows[1].request_start_s, 0.1) && close(rows[1].request_end_s, 0.1005));
        assert!(close(rows[2].response_start_s, 0.505) && close(rows[2].response_end_s, 0.5054));
    }

    /// The connection row keeps describing the first exchange, now that every exchange
    /// has its own walk.
    #[test]
    fn connection_row_describes_the_first_exchange() {
        let r = ConnRecord::from_conn(&persistent());
        assert_eq!((r.requests, r.unique_bytes_c2s, r.unique_bytes_s2c), (3, 1900, 12820));
        assert!(close(r.server_delay_ms, 20.0) && close(r.query_delay_ms, 32.0) && close(r.response_time_ms, 52.2));
        assert!(close(r.request_start_s, 0.01) && close(r.response_end_s, 0.0622));
    }

    #[test]
    fn column_lists_match_the_rows() {
        let rows: Vec<_> = ExchangeRecord::from_conn(&persistent()).collect();
        let cols = exchange_columns(&rows);
        assert_eq!(cols.iter().map(|c| c.0).collect::<Vec<_>>(), EXCHANGE_COLUMNS);
        assert_eq!(cols[8], ("header_bytes", Column::F64(vec![Some(2920.0), None, Some(300.0)])));
    }
}
