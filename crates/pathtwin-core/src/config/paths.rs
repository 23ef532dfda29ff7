//! The paths view (NSDI'09): `[[path]]` entries — base RTT, ABW or a reactivity table per
//! direction, ABW that follows a recorded profile (`abw_steps`), capacity, queue, mode, loss,
//! reordering, queue discipline — and `[[shared]]`
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

/// `[path.abw_steps]`: the ABW of each direction over time, as steps `[time, abw]` from the
/// start of the run (before the first step, the path's `abw`). It is cross traffic that does
/// not react to the foreground — what iBox (SIGMETRICS 2022) infers from one transfer's
/// traces and `pathtwin trace to-paths` writes — replayed by the placeholders at C − ABW(t).
/// A direction left out keeps its constant `abw`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbwSteps {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub a_to_b: Vec<(Duration, Rate)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub b_to_a: Vec<(Duration, Rate)>,
}

impl AbwSteps {
    /// The steps of `direction` (0: `between[0]` to `between[1]`).
    pub fn direction(&self, direction: usize) -> &[(Duration, Rate)] {
        if direction == 0 { &self.a_to_b } else { &self.b_to_a }
    }

    /// The key of a direction's list, for errors.
    pub fn key(direction: usize) -> &'static str {
        if direction == 0 { "a_to_b" } else { "b_to_a" }
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
    /// ABW over time (non-reactive cross traffic); `abw` holds before the first step and
    /// sizes the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abw_steps: Option<AbwSteps>,
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
        if let Some(steps) = &p.abw_steps {
            validate_steps(steps, p, &format!("path[{i}].abw_steps"))?;
        }
        qdisc::check(p.qdisc_spec(), &format!("path[{i}]"))?;
    }
    Ok(())
}

/// A profile needs a constant `abw` to start from and a capacity to vary below (path mode);
/// its times increase and its rates are positive. That they stay within the capacity is
/// checked where the capacity is known (`topology`).
fn validate_steps(steps: &AbwSteps, p: &PathConfig, key: &str) -> Result<(), ConfigError> {
    if p.reactivity.is_some() {
        return Err(ConfigError::invalid(key, "a path's ABW follows either a reactivity table or steps over time, not both"));
    }
    if p.mode == Mode::Link {
        return Err(ConfigError::invalid(key, "mode = \"link\" drains at a constant ABW; steps need mode = \"path\""));
    }
    if steps.a_to_b.is_empty() && steps.b_to_a.is_empty() {
        return Err(ConfigError::invalid(key, "no steps: give a_to_b, b_to_a or both as [[time, abw], ...]"));
    }
    for d in 0..2 {
        let list = steps.direction(d);
        for (k, &(t, rate)) in list.iter().enumerate() {
            let at = || format!("{key}.{}[{k}]", AbwSteps::key(d));
            if rate.bps() == 0 {
                return Err(ConfigError::invalid(at(), "ABW must be positive"));
            }
            if k > 0 && t <= list[k - 1].0 {
                return Err(ConfigError::invalid(at(), format!("step at {t} is not after the one before it ({})", list[k - 1].0)));
            }
        }
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

    const STEPS: &str = "hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"50ms\"\nabw = \"8mbit\"\ncapacity = \"20mbit\"\n";

    fn steps_error(extra: &str) -> String {
        Config::from_toml(&format!("{STEPS}{extra}"), "t.toml").err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn abw_steps_parse_and_round_trip_through_the_serialiser() {
        let cfg = Config::from_toml(&format!("{STEPS}[path.abw_steps]\na_to_b = [[\"0s\", \"12mbit\"], [\"1.5s\", \"4mbit\"]]\n"), "t.toml").unwrap();
        let steps = cfg.paths[0].abw_steps.clone().unwrap();
        assert_eq!(steps.a_to_b.len(), 2);
        assert!(steps.b_to_a.is_empty());
        let again = Config::from_toml(&toml::to_string(&cfg).unwrap(), "again.toml").unwrap();
        assert_eq!(again.paths[0].abw_steps, Some(steps));
    }

    #[test]
    fn bad_abw_steps_are_one_line_errors_naming_the_step() {
        let cases = [
            ("[path.abw_steps]\na_to_b = [[\"2s\", \"4mbit\"], [\"1s\", \"5mbit\"]]\n", "path[0].abw_steps.a_to_b[1]"),
            ("[path.abw_steps]\nb_to_a = [[\"1s\", \"0mbit\"]]\n", "path[0].abw_steps.b_to_a[0]"),
            ("[path.abw_steps]\n", "path[0].abw_steps"),
            ("[path.abw_steps]\nforward = [[\"1s\", \"3mbit\"]]\n", "forward"),
        ];
        for (extra, key) in cases {
            let e = steps_error(extra);
            assert!(e.contains(key) && !e.contains('\n'), "{extra:?} gave {e:?}");
        }
    }
}
