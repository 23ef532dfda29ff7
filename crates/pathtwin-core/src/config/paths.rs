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

/// `[[shared]]`: path directions that cross one bandwidth queue, in one of two forms.
///
/// NSDI'09's (§2.3) is one source's: `source`, `destinations` and `direction` (`out`: the
/// paths from the source, `in`: into it); the class's queue replaces its members' own.
/// The other names any directions, `paths = [["a", "b"], ["c", "b"]]`, from different
/// sources too: a bottleneck or an access link that paths of several sources cross, which
/// per-source classes cannot hold. Its queue is crossed after each member's own (or its
/// per-source class's) queue, so a direction may be in several such classes and crosses
/// each (the paths out of one host are its uplink, the paths into it its downlink).
///
/// Both forms take the flow-weighted mean of their members' ABW (§2.3) unless `abw` gives
/// the class's own (what the members achieve loaded together), a capacity of their largest
/// unless `capacity` is given, and the smallest of their queues unless `queue` is given, or
/// `queue_delay`: the queueing delay the class adds when full, what a measurement sees of a
/// queue from the ends (the round trip its members' flows had loaded together, less the
/// base RTT). A full drop-tail queue of `queue_delay` × `capacity` bytes delays a packet by
/// exactly that: the queue's time, not its space, is what the truth's queue and the model's
/// (drained at the model's capacity, placeholders included) have in common.
/// A `paths` class binds only where two or more of its members carry flows (a member's own
/// queue already holds what it achieved measured alone, through this link too): at once
/// when a second member does, and until fewer than two have for a hold of 3 s
/// (`element::PathsClass`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destinations: Vec<String>,
    /// `out`: the queue carries source → destinations; `in`: destinations → source (the
    /// per-source form only; default `out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<SharedDirection>,
    /// Member directions `[from, to]` of any sources (the other form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<[String; 2]>,
    /// Explicit size of the shared queue; otherwise the smallest queue of its paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueLimit>,
    /// The shared queue's delay when full: its size is this time at the class's capacity
    /// (instead of `queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_delay: Option<Duration>,
    /// The class's ABW (a `paths` class: while bound, above); otherwise the flow-weighted
    /// mean of its paths' ABW.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abw: Option<Rate>,
    /// The class queue's capacity; otherwise the largest of its paths'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Rate>,
}

impl SharedConfig {
    /// The member directions as (from, to) host names, in the order written, and the key
    /// that names each in errors.
    pub fn members(&self) -> Vec<((&str, &str), String)> {
        match &self.source {
            Some(src) => self
                .destinations
                .iter()
                .enumerate()
                .map(|(j, d)| {
                    let pair = match self.direction.unwrap_or_default() {
                        SharedDirection::Out => (src.as_str(), d.as_str()),
                        SharedDirection::In => (d.as_str(), src.as_str()),
                    };
                    (pair, format!("destinations[{j}]"))
                })
                .collect(),
            None => self.paths.iter().enumerate().map(|(j, [a, b])| ((a.as_str(), b.as_str()), format!("paths[{j}]"))).collect(),
        }
    }

    /// Whether this is NSDI'09's per-source form, whose queue replaces its members' own.
    pub fn per_source(&self) -> bool {
        self.source.is_some()
    }
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

/// Checks the `[[shared]]` classes: one form each, known hosts, no direction twice. Whether
/// their paths exist is known once the paths are compiled (`topology`).
pub(super) fn validate_shared(shared: &[SharedConfig], hosts: &Names<'_>) -> Result<(), ConfigError> {
    for (i, s) in shared.iter().enumerate() {
        let key = format!("shared[{i}]");
        match (&s.source, s.paths.is_empty()) {
            (Some(_), false) => {
                return Err(ConfigError::invalid(format!("{key}.paths"), "give either source and destinations (one source's paths) or paths (any directions), not both"));
            }
            (None, true) => {
                return Err(ConfigError::invalid(key, "missing source and destinations (one source's paths) or paths (any directions, [[from, to], ...])"));
            }
            (None, false) => {
                if !s.destinations.is_empty() {
                    return Err(ConfigError::invalid(format!("{key}.destinations"), "destinations need a source; a paths class lists each direction as [from, to]"));
                }
                if s.direction.is_some() {
                    return Err(ConfigError::invalid(format!("{key}.direction"), "direction is for a source's class; a paths class lists each direction as [from, to]"));
                }
                for (j, [a, b]) in s.paths.iter().enumerate() {
                    hosts.require(a, || format!("{key}.paths[{j}][0]"))?;
                    hosts.require(b, || format!("{key}.paths[{j}][1]"))?;
                    if a == b {
                        return Err(ConfigError::invalid(format!("{key}.paths[{j}]"), "a path needs two different hosts"));
                    }
                    if s.paths[..j].contains(&s.paths[j]) {
                        return Err(ConfigError::invalid(format!("{key}.paths[{j}]"), format!("{a} -> {b} is listed twice")));
                    }
                }
                if s.paths.len() < 2 {
                    return Err(ConfigError::invalid(format!("{key}.paths"), "a shared bottleneck needs at least two paths"));
                }
            }
            (Some(src), true) => {
                hosts.require(src, || format!("{key}.source"))?;
                for (j, d) in s.destinations.iter().enumerate() {
                    hosts.require(d, || format!("{key}.destinations[{j}]"))?;
                    if s.destinations[..j].contains(d) {
                        return Err(ConfigError::invalid(format!("{key}.destinations[{j}]"), format!("{d} is listed twice")));
                    }
                }
                if s.destinations.len() < 2 {
                    return Err(ConfigError::invalid(format!("{key}.destinations"), "a shared bottleneck needs at least two destinations"));
                }
            }
        }
        if s.abw.is_some_and(|r| r.bps() == 0) {
            return Err(ConfigError::invalid(format!("{key}.abw"), "ABW must be positive"));
        }
        if s.capacity.is_some_and(|r| r.bps() == 0) {
            return Err(ConfigError::invalid(format!("{key}.capacity"), "capacity must be positive"));
        }
        if let Some(d) = s.queue_delay {
            if s.queue.is_some() {
                return Err(ConfigError::invalid(format!("{key}.queue_delay"), "give either queue (its size) or queue_delay (its delay when full), not both"));
            }
            if d.as_nanos() == 0 {
                return Err(ConfigError::invalid(format!("{key}.queue_delay"), "a queue's delay when full must be positive"));
            }
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

    const THREE: &str = "hosts = [\"a\", \"b\", \"c\"]\n";

    fn shared_error(class: &str) -> String {
        Config::from_toml(&format!("{THREE}[[shared]]\n{class}"), "t.toml").err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn a_paths_class_parses_and_round_trips_through_the_serialiser() {
        let text = format!("{THREE}[[shared]]\npaths = [[\"a\", \"b\"], [\"c\", \"b\"]]\nabw = \"10mbit\"\nqueue_delay = \"600ms\"\n");
        let cfg = Config::from_toml(&text, "t.toml").unwrap();
        let s = &cfg.shared[0];
        assert_eq!(s.queue_delay, Some(crate::time::Duration::from_millis(600)));
        assert_eq!(s.members().iter().map(|(p, _)| *p).collect::<Vec<_>>(), [("a", "b"), ("c", "b")]);
        assert!(!s.per_source());
        let again = Config::from_toml(&toml::to_string(&cfg).unwrap(), "again.toml").unwrap();
        assert_eq!(again.shared, cfg.shared);
    }

    #[test]
    fn bad_shared_classes_are_one_line_errors_naming_the_key() {
        let cases = [
            ("paths = [[\"a\", \"b\"], [\"a\", \"x\"]]\n", "shared[0].paths[1][1]: unknown host \"x\""),
            ("paths = [[\"a\", \"b\"], [\"c\", \"c\"]]\n", "shared[0].paths[1]: a path needs two different hosts"),
            ("paths = [[\"a\", \"b\"], [\"a\", \"b\"]]\n", "shared[0].paths[1]: a -> b is listed twice"),
            ("paths = [[\"a\", \"b\"]]\n", "shared[0].paths: a shared bottleneck needs at least two paths"),
            ("paths = [[\"a\", \"b\"], [\"c\", \"b\"]]\ndirection = \"in\"\n", "shared[0].direction: direction is for a source's class; a paths class lists each direction as [from, to]"),
            ("paths = [[\"a\", \"b\"], [\"c\", \"b\"]]\nsource = \"a\"\n", "shared[0].paths: give either source and destinations (one source's paths) or paths (any directions), not both"),
            ("abw = \"1mbit\"\n", "shared[0]: missing source and destinations (one source's paths) or paths (any directions, [[from, to], ...])"),
            ("paths = [[\"a\", \"b\"], [\"c\", \"b\"]]\nabw = \"0mbit\"\n", "shared[0].abw: ABW must be positive"),
            ("source = \"a\"\ndestinations = [\"b\", \"b\"]\n", "shared[0].destinations[1]: b is listed twice"),
            ("paths = [[\"a\", \"b\"], [\"c\", \"b\"]]\nqueue = \"100p\"\nqueue_delay = \"600ms\"\n", "shared[0].queue_delay: give either queue (its size) or queue_delay (its delay when full), not both"),
            ("paths = [[\"a\", \"b\"], [\"c\", \"b\"]]\nqueue_delay = \"0ms\"\n", "shared[0].queue_delay: a queue's delay when full must be positive"),
        ];
        for (class, want) in cases {
            assert_eq!(shared_error(class), want, "{class:?}");
        }
    }
}
