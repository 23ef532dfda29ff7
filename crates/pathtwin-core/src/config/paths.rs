//! The paths view (NSDI'09): `[[path]]` entries — base RTT, ABW or a reactivity table per
//! direction, capacity, queue, mode, loss, reordering, queue discipline — and `[[shared]]`
//! bottleneck classes, with their checks against the hosts. Compiling them into queues and
//! delay lines is `topology`'s.

use super::qdisc::{self, FrioSettings, QdiscKind, QdiscSpec, RedSettings, RioSettings};
use super::{ConfigError, Names, PerDirection};
use crate::time::Duration;
use crate::units::{Fraction, QueueLimit, Rate, Size};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A reactivity table as written: `{ 1 = "2mbit", 2 = "3mbit" }` (flows → ABW).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TableSpec(pub BTreeMap<String, Rate>);

/// One table for both directions, or `[table_a_to_b, table_b_to_a]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ReactivitySpec {
    Both(TableSpec),
    PerDirection([TableSpec; 2]),
}

impl ReactivitySpec {
    pub fn table(&self, direction: usize) -> &TableSpec {
        match self {
            ReactivitySpec::Both(t) => t,
            ReactivitySpec::PerDirection(ts) => &ts[direction],
        }
    }
}

/// How a path is emulated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// NSDI'09 path emulation: capacity separate from ABW, placeholders, derived queues.
    #[default]
    Path,
    /// A plain link emulator (C = ABW, 73 KB queue unless given), the paper's baseline.
    Link,
}

/// `[[path]]`: the NSDI'09 path between two hosts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathConfig {
    pub between: [String; 2],
    /// Base RTT, split evenly between the directions.
    pub rtt: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abw: Option<PerDirection<Rate>>,
    /// ABW as a function of active foreground flows; replaces `abw`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reactivity: Option<ReactivitySpec>,
    /// Bottleneck capacity; 100 Mbit/s in path mode, = ABW in link mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<PerDirection<Rate>>,
    /// Explicit queue size; derived from Eq. 2/4 when absent (path mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<PerDirection<QueueLimit>>,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<PerDirection<Fraction>>,
    /// Share of packets held back `reorder_delay` in each direction, so that later ones
    /// overtake them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<PerDirection<Fraction>>,
    /// How long a reordered packet is held (default [`DEFAULT_REORDER_DELAY`](super::DEFAULT_REORDER_DELAY)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_delay: Option<Duration>,
    /// w_max for the queue bounds; 65535 B (no window scaling) by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wmax: Option<Size>,
    /// Foreground flows per direction that Eq. 2 provisions for (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<PerDirection<u32>>,
    /// Cap on a derived queue (the paper's implementation: 1 MB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queue: Option<Size>,
    /// Reject an explicit queue outside the bounds (default true). Set false to reproduce
    /// the paper's "bad queue size" rows.
    #[serde(default = "yes")]
    pub enforce_bounds: bool,
    #[serde(default)]
    pub qdisc: QdiscKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red: Option<RedSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rio: Option<RioSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frio: Option<FrioSettings>,
}

fn yes() -> bool {
    true
}

/// `[[shared]]`: paths from `source` to `destinations` share one bandwidth queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedConfig {
    pub source: String,
    pub destinations: Vec<String>,
    /// `out`: the queue carries source → destinations; `in`: destinations → source.
    #[serde(default)]
    pub direction: SharedDirection,
    /// Explicit size of the shared queue; otherwise the smallest derived queue of its paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueLimit>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SharedDirection {
    #[default]
    Out,
    In,
}

impl PathConfig {
    pub fn qdisc_spec(&self) -> QdiscSpec<'_> {
        QdiscSpec { kind: self.qdisc, red: self.red.as_ref(), rio: self.rio.as_ref(), frio: self.frio.as_ref() }
    }
}

/// Checks the `[[path]]` entries: their hosts, ABW and queue discipline.
pub(super) fn validate(paths: &[PathConfig], hosts: &Names<'_>) -> Result<(), ConfigError> {
    for (i, p) in paths.iter().enumerate() {
        for (j, h) in p.between.iter().enumerate() {
            hosts.require(h, || format!("path[{i}].between[{j}]"))?;
        }
        if p.between[0] == p.between[1] {
            return Err(ConfigError::invalid(format!("path[{i}].between"), "a path needs two different hosts"));
        }
        if p.abw.is_none() && p.reactivity.is_none() {
            return Err(ConfigError::invalid(format!("path[{i}]"), "missing abw (or a reactivity table)"));
        }
        if p.abw.is_some() && p.reactivity.is_some() {
            return Err(ConfigError::invalid(format!("path[{i}].reactivity"), "give either abw or reactivity, not both"));
        }
        qdisc::check(p.qdisc_spec(), &format!("path[{i}]"))?;
    }
    Ok(())
}

/// Checks the `[[shared]]` classes' hosts. Whether their paths exist is known once the paths
/// are compiled (`topology`).
pub(super) fn validate_shared(shared: &[SharedConfig], hosts: &Names<'_>) -> Result<(), ConfigError> {
    for (i, s) in shared.iter().enumerate() {
        hosts.require(&s.source, || format!("shared[{i}].source"))?;
        for (j, d) in s.destinations.iter().enumerate() {
            hosts.require(d, || format!("shared[{i}].destinations[{j}]"))?;
        }
        if s.destinations.len() < 2 {
            return Err(ConfigError::invalid(format!("shared[{i}].destinations"), "a shared bottleneck needs at least two destinations"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn unknown_host_is_named() {
        let e = Config::from_toml("hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"c\"]\nrtt = \"50ms\"\nabw = \"1mbit\"\n", "t.toml").unwrap_err().to_string();
        assert_eq!(e, "path[0].between[1]: unknown host \"c\"");
    }
}
