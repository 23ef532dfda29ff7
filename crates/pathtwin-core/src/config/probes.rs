//! `[[probe]]`: a light probe series between two hosts — a datagram from `from` to `to` every
//! `interval`, each answered by a smaller echo — and its checks. It is what `pathtwin
//! measure` sends between real or emulated hosts (NSDI'09 §3.3's "simple ping packets, sent
//! frequently over long periods" for the base RTT; ALGORITHMS.md §7's back-to-back probes for
//! shared-bottleneck detection), as a part of the model's workload, so that a measurement of
//! a simulated network sees the same packets. The simulator runs it and records every probe's
//! send, arrival and echo times (the `probes` table); the emulator refuses it, since its
//! hosts' own programs probe there.

use super::{ConfigError, Names};
use crate::time::Duration;
use crate::units::Size;
use serde::{Deserialize, Serialize};

/// IP bytes of a probe by default: 64 bytes of payload in UDP over IPv4, as `pathtwin
/// measure`'s probes.
pub const DEFAULT_PROBE_SIZE: u64 = 92;
/// IP bytes of an echo by default: 36 bytes of payload in UDP over IPv4.
pub const DEFAULT_ECHO_SIZE: u64 = 64;
/// Smallest datagram: an IPv4 and a UDP header.
pub const MIN_DATAGRAM: u64 = 28;
/// Largest datagram: one Ethernet MTU (a probe must not be fragmented).
pub const MAX_DATAGRAM: u64 = 1500;
/// Most probes all `[[probe]]` entries may send: each keeps a row of the `probes` table.
pub const MAX_PROBES: u64 = 10_000_000;

/// `[[probe]]`: a probe from `from` to `to` every `interval` from `start` until `stop` (or the
/// end of the run), each echoed by `to` at once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    pub from: String,
    pub to: String,
    pub interval: Duration,
    #[serde(default)]
    pub start: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Duration>,
    /// IP bytes of each probe (default [`DEFAULT_PROBE_SIZE`]).
    #[serde(default = "probe_size")]
    pub size: Size,
    /// IP bytes of each echo (default [`DEFAULT_ECHO_SIZE`]).
    #[serde(default = "echo_size")]
    pub echo_size: Size,
}

fn probe_size() -> Size {
    Size::from_bytes(DEFAULT_PROBE_SIZE)
}

fn echo_size() -> Size {
    Size::from_bytes(DEFAULT_ECHO_SIZE)
}

impl ProbeConfig {
    /// Probes this entry sends in a run of `run` (the first at `start`).
    pub fn count(&self, run: Duration) -> u64 {
        let end = self.stop.map_or(run, |s| s.min(run));
        match end.as_nanos().checked_sub(self.start.as_nanos()) {
            Some(span) if span > 0 => span.div_ceil(self.interval.as_nanos().max(1)),
            _ => 0,
        }
    }
}

/// Checks the `[[probe]]` entries of a run lasting `run`.
pub(super) fn validate(probes: &[ProbeConfig], hosts: &Names<'_>, run: Duration) -> Result<(), ConfigError> {
    let mut total: u64 = 0;
    for (i, p) in probes.iter().enumerate() {
        hosts.require(&p.from, || format!("probe[{i}].from"))?;
        hosts.require(&p.to, || format!("probe[{i}].to"))?;
        if p.from == p.to {
            return Err(ConfigError::invalid(format!("probe[{i}].to"), "a probe needs two different hosts"));
        }
        if p.interval.as_nanos() == 0 {
            return Err(ConfigError::invalid(format!("probe[{i}].interval"), "interval must be positive"));
        }
        if let Some(stop) = p.stop {
            if stop <= p.start {
                return Err(ConfigError::invalid(format!("probe[{i}].stop"), "stop must be after start"));
            }
        }
        for (key, size) in [("size", p.size), ("echo_size", p.echo_size)] {
            if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&size.bytes()) {
                return Err(ConfigError::invalid(
                    format!("probe[{i}].{key}"),
                    format!("{} bytes is outside {MIN_DATAGRAM}..{MAX_DATAGRAM} (IP bytes: headers to one MTU)", size.bytes()),
                ));
            }
        }
        total = total.saturating_add(p.count(run));
        if total > MAX_PROBES {
            return Err(ConfigError::invalid(
                format!("probe[{i}]"),
                format!("the [[probe]] entries send more than {MAX_PROBES} probes in this run; use a longer interval or a shorter span"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const HOSTS: &str = "hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"20ms\"\nabw = \"10mbit\"\n[run]\nduration = \"10s\"\n";

    fn err(probe: &str) -> String {
        Config::from_toml(&format!("{HOSTS}[[probe]]\n{probe}"), "").unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_the_measurement_tools_datagrams() {
        let cfg = Config::from_toml(&format!("{HOSTS}[[probe]]\nfrom = \"a\"\nto = \"b\"\ninterval = \"20ms\"\n"), "").unwrap();
        let p = &cfg.probes[0];
        assert_eq!((p.size.bytes(), p.echo_size.bytes()), (92, 64));
        assert_eq!(p.count(cfg.run.duration), 500, "10 s every 20 ms from 0");
    }

    #[test]
    fn count_ends_at_stop_or_the_run() {
        let cfg = Config::from_toml(&format!("{HOSTS}[[probe]]\nfrom = \"a\"\nto = \"b\"\ninterval = \"300ms\"\nstart = \"1s\"\nstop = \"2s\"\n"), "").unwrap();
        // Probes at 1.0, 1.3, 1.6, 1.9 s.
        assert_eq!(cfg.probes[0].count(cfg.run.duration), 4);
    }

    #[test]
    fn mistakes_name_their_key() {
        assert_eq!(err("from = \"a\"\nto = \"c\"\ninterval = \"1s\""), "probe[0].to: unknown host \"c\"");
        assert_eq!(err("from = \"a\"\nto = \"a\"\ninterval = \"1s\""), "probe[0].to: a probe needs two different hosts");
        assert_eq!(err("from = \"a\"\nto = \"b\"\ninterval = \"0s\""), "probe[0].interval: interval must be positive");
        assert_eq!(err("from = \"a\"\nto = \"b\"\ninterval = \"1s\"\nstart = \"2s\"\nstop = \"1s\""), "probe[0].stop: stop must be after start");
        assert!(err("from = \"a\"\nto = \"b\"\ninterval = \"1s\"\nsize = \"20B\"").starts_with("probe[0].size: 20 bytes is outside 28..1500"));
        assert!(err("from = \"a\"\nto = \"b\"\ninterval = \"1ns\"").starts_with("probe[0]: the [[probe]] entries send more than"));
    }
}
