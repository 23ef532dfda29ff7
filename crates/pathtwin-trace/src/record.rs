//! The output row: one [`ConnRecord`] per connection, and its columnar form.
//!
//! Owns the names, units and meaning of every output column (the replay database of Monkey
//! See), and Monkey's pruning rule (§3.2: incomplete handshake, termination or sequence, or
//! no ACK pair to estimate bandwidth from). Column names carry their unit; times are
//! seconds since the Unix epoch, durations milliseconds, rates bits per second.

use crate::conn::{Conn, Termination, DOWN, UP};

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

/// A column of values, one per connection.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    U64(Vec<u64>),
    F64(Vec<Option<f64>>),
    Str(Vec<Option<String>>),
    Bool(Vec<bool>),
}

/// Defines [`ConnRecord`] and its column list from one table, so names cannot drift.
macro_rules! record {
    ($( $(#[doc = $doc:literal])* $name:ident : $kind:ident ),* $(,)?) => {
        /// One connection's row.
        #[derive(Debug, Clone, PartialEq)]
        pub struct ConnRecord {
            $( $(#[doc = $doc])* pub $name: record!(@ty $kind), )*
        }

        /// The rows as named columns, in declaration order.
        pub fn to_columns(rows: &[ConnRecord]) -> Vec<(&'static str, Column)> {
            vec![$( (stringify!($name), Column::$kind(rows.iter().map(|r| r.$name.clone()).collect())), )*]
        }

        /// Column names in order.
        pub const COLUMNS: &[&str] = &[$( stringify!($name), )*];
    };
    (@ty U64) => { u64 };
    (@ty F64) => { Option<f64> };
    (@ty Str) => { Option<String> };
    (@ty Bool) => { bool };
}

record! {
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
    bottleneck_bps: F64,
    bandwidth_samples: U64,
    /// Server data packets per client ACK before the first loss.
    ack_ratio: F64,
    /// "quick" (an ACK per packet) or "delayed".
    delayed_ack: Str,
    delayed_ack_timeout_ms: F64,
    /// Client window of the first request packet, scaled, in bytes.
    rwin_bytes: F64,
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
            bottleneck_bps: bw,
            bandwidth_samples: bw_n,
            ack_ratio,
            delayed_ack: ack_ratio.map(|r| if r < 1.5 { "quick" } else { "delayed" }.into()),
            delayed_ack_timeout_ms: d.delack.median().map(|x| x / 1e6),
            rwin_bytes: opt(c.request_rwin),
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
        }
    }
}
