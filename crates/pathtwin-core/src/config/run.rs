//! `[run]`: how long and how a simulation runs (duration, seed, sampling, captures), and its
//! checks.

use super::{ConfigError, Names};
use crate::time::Duration;
use serde::{Deserialize, Serialize};

/// `[run]`: how long and how a simulation runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    pub duration: Duration,
    pub seed: u64,
    /// Interval of the time-series tables.
    pub sample_interval: Duration,
    /// Hosts at which the simulator writes a pcap of every packet sent and received.
    pub pcap: Vec<String>,
    /// A foreground flow that sends no payload for this long stops counting for reactivity.
    pub flow_idle_timeout: Duration,
    /// Simulator: end the run as soon as every flow has finished (both ends closed), with
    /// `duration` as the cap — a replay knows its workload, not how long it takes.
    #[serde(skip_serializing_if = "is_false")]
    pub until_done: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            duration: Duration::from_secs(60),
            seed: 1,
            sample_interval: Duration::from_millis(100),
            pcap: Vec::new(),
            flow_idle_timeout: crate::monitor::DEFAULT_IDLE_TIMEOUT,
            until_done: false,
        }
    }
}

/// The shortest `[run] flow_idle_timeout` accepted.
pub const MIN_FLOW_IDLE_TIMEOUT: Duration = Duration::from_millis(1);

/// The shortest `[run] sample_interval` accepted. Every sample is a row per flow and per
/// queue: at a nanosecond a simulated millisecond would be a million rows of each, and a
/// microsecond is already finer than a full-size packet's time on a 10 Gbit/s link.
pub const MIN_SAMPLE_INTERVAL: Duration = Duration::from_micros(1);

/// Checks `[run]`: the captured hosts exist, the seed fits TOML, and neither the sampling
/// interval nor the idle timeout is too short.
pub(super) fn validate(run: &RunConfig, hosts: &Names<'_>) -> Result<(), ConfigError> {
    for (i, h) in run.pcap.iter().enumerate() {
        hosts.require(h, || format!("run.pcap[{i}]"))?;
    }
    // A seed from JSON may be any u64; the TOML a config is written back as holds i64.
    if run.seed > i64::MAX as u64 {
        return Err(ConfigError::invalid("run.seed", format!("{} is above {}, the largest integer TOML can hold", run.seed, i64::MAX)));
    }
    if run.sample_interval < MIN_SAMPLE_INTERVAL {
        return Err(ConfigError::invalid("run.sample_interval", format!("must be at least {MIN_SAMPLE_INTERVAL}")));
    }
    // A shorter timeout retires flows between their own packets, and the monitor's sweeps
    // (every quarter of it) would outnumber them.
    if run.flow_idle_timeout < MIN_FLOW_IDLE_TIMEOUT {
        return Err(ConfigError::invalid("run.flow_idle_timeout", format!("must be at least {MIN_FLOW_IDLE_TIMEOUT}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    /// A zero or sub-millisecond idle timeout is refused with the key named; a millisecond is
    /// taken (a zero one once stalled a simulation: the monitor swept at the time it swept).
    #[test]
    fn the_flow_idle_timeout_must_be_at_least_a_millisecond() {
        let cfg = |t: &str| {
            let text = format!("hosts = [\"a\", \"b\"]\n[run]\nflow_idle_timeout = \"{t}\"\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"10ms\"\nabw = \"1mbit\"\n");
            Config::from_toml(&text, "t.toml")
        };
        for bad in ["0s", "999us"] {
            let err = cfg(bad).expect_err(bad).to_string();
            assert!(err.ends_with("run.flow_idle_timeout: must be at least 1ms"), "{err}");
        }
        assert!(cfg("1ms").is_ok());
    }
}
