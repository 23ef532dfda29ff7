//! The config schema — defined once, here — and its loading with one-line errors.
//!
//! A file describes a topology in one of two views and, optionally, a workload. Each section
//! has a module that owns its schema and its checks:
//! - `paths`: the **paths** view (NSDI'09), `hosts = [...]`, `[[path]]` per host pair (base
//!   RTT, ABW or a reactivity table per direction, capacity, queue, mode, loss), `[[shared]]`
//!   bottleneck classes;
//! - `links`: the **links** view (router level), `hosts`, `routers`, `[[link]]` with rate,
//!   one-way delay, queue;
//! - `qdisc`: the queue discipline of a path or link (`qdisc`, `red`, `rio`, `frio`);
//! - `workload`, `tcp`, `run` (simulator): `[[flow]]` entries, `[tcp]` defaults and the
//!   controllers' tables, `[run]`; the emulator ignores `[[flow]]`, as real applications are
//!   its workload;
//! - `markers`: `[[marker]]` DiffServ markers in either view;
//! - `pipes`: `[[pipe]]` per-connection paths (replay); `monarch`: `[monarch]` (emulator);
//! - `probes`: `[[probe]]` probe series between hosts (simulator), as `pathtwin measure`
//!   sends them;
//! - `per_direction`: values given per direction ([`PerDirection`]): once for both directions
//!   (`"10mbit"`), as `"a_to_b/b_to_a"`, or as a two-element array; the first value is the
//!   direction from `between[0]` to `between[1]`.
//!
//! This module owns the root ([`Config`]: the name, hosts and routers, and the sections),
//! parsing from TOML and JSON, [`ConfigError`], and [`Config::validate`], which checks the
//! names and the view and then each section in turn. Every public type of the sections is
//! re-exported here, so that `config::X` names it wherever it is declared. Building the model
//! from a config (routes, queues, markers, endpoints) is not the config's: the modules that
//! build read the config, never the other way round.
//!
//! Errors name the key (`path[0].rtt`), the line when the text is TOML, and quote the value.
//! Python passes dicts as JSON through [`Config::from_json`]; the schema is never restated
//! elsewhere.

mod links;
mod markers;
mod monarch;
mod paths;
mod per_direction;
mod pipes;
mod probes;
mod qdisc;
mod run;
mod tcp;
mod workload;

pub use links::LinkConfig;
pub use markers::{MarkerConfig, MarkerKind, Placement};
pub use monarch::{special_purpose, MonarchConfig, MonarchTarget, ProbeKind, TargetIpIds, DEFAULT_MAX_RATE};
pub use paths::{AbwSteps, Mode, PathConfig, ReactivitySpec, SharedConfig, SharedDirection, TableSpec};
pub use per_direction::PerDirection;
pub use pipes::{PipeConfig, MAX_PIPES_PER_HOST};
pub use probes::{ProbeConfig, DEFAULT_ECHO_SIZE, DEFAULT_PROBE_SIZE};
pub use qdisc::{FrioSettings, QdiscKind, QdiscSpec, RedSettings, RioClassSettings, RioSettings};
pub use run::RunConfig;
pub use tcp::{BicSettings, CubicPreset, CubicSettings, MonacoSettings, NewRenoTimer, RoundRtt, TcpProfile, TcpSettings, VegasPreset, VegasRules, VegasSettings};
pub use workload::{connection_labels, AppKind, ExchangeSpec, FlowConfig, MAX_CONNECTIONS};

use crate::time::Duration;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// A user's mistake in a config, with the key it concerns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not valid TOML/JSON, a key is unknown, or a value does not parse.
    #[error("{origin}{key}: {message}")]
    Syntax { origin: String, key: String, message: String },
    /// The values parse but do not make sense together (unknown host, infeasible queue, ...).
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
}

impl ConfigError {
    pub fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid { key: key.into(), message: message.into() }
    }
}

/// Which topology view a config uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Paths,
    Links,
}

/// How long a reordered packet is held when `reorder_delay` is not given: a few packet
/// times on a broadband link, enough to be overtaken by the packets behind it.
pub const DEFAULT_REORDER_DELAY: Duration = Duration::from_millis(5);

/// A whole config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub routers: Vec<String>,
    #[serde(default)]
    pub run: RunConfig,
    #[serde(default)]
    pub tcp: TcpSettings,
    #[serde(default, rename = "path")]
    pub paths: Vec<PathConfig>,
    #[serde(default)]
    pub shared: Vec<SharedConfig>,
    #[serde(default, rename = "link")]
    pub links: Vec<LinkConfig>,
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowConfig>,
    /// Monarch's proxy (emulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monarch: Option<MonarchConfig>,
    /// Per-connection pipes (replay).
    #[serde(default, rename = "pipe", skip_serializing_if = "Vec::is_empty")]
    pub pipes: Vec<PipeConfig>,
    /// DiffServ markers.
    #[serde(default, rename = "marker", skip_serializing_if = "Vec::is_empty")]
    pub markers: Vec<MarkerConfig>,
    /// Probe series between hosts (simulator).
    #[serde(default, rename = "probe", skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeConfig>,
}

impl Config {
    /// Parses TOML text; `origin` (a file name) prefixes errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let de = toml::Deserializer::new(text);
        let cfg: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let line = inner.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            syntax_error(location(origin, line), key, inner.message().to_string())
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parses JSON text (how Python passes dicts).
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        Config::from_json_file(text, "")
    }

    /// Parses JSON text read from a file; `origin` (its name) and the line prefix errors, as
    /// [`Config::from_toml`]'s do.
    pub fn from_json_file(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let cfg: Config = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            // A dict from Python has no lines to point at; a file has.
            let at = if origin.is_empty() { String::new() } else { location(origin, Some(inner.line())) };
            syntax_error(at, key, inner.to_string())
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The view this config uses.
    pub fn view(&self) -> View {
        if self.links.is_empty() {
            View::Paths
        } else {
            View::Links
        }
    }

    /// Checks everything that does not need compilation: the names and the view, then each
    /// section (paths, shared bottlenecks, links, pipes, Monarch, flows, markers, probes, run), in
    /// this order; the first mistake is the one reported.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let nodes = check_names(&self.hosts, &self.routers)?;
        if !self.paths.is_empty() && !self.links.is_empty() {
            return Err(ConfigError::invalid("link", "a file uses either [[path]] (paths view) or [[link]] (links view), not both"));
        }
        if !self.routers.is_empty() && self.links.is_empty() {
            return Err(ConfigError::invalid("routers", "routers need [[link]] entries (links view)"));
        }
        let hosts = Names::new(&self.hosts, "host");
        paths::validate(&self.paths, &hosts)?;
        paths::validate_shared(&self.shared, &hosts)?;
        links::validate(&self.links, &nodes)?;
        pipes::validate(&self.pipes, &hosts)?;
        if let Some(m) = &self.monarch {
            monarch::validate(m, &hosts)?;
        }
        workload::validate(&self.flows, &self.pipes, &hosts)?;
        markers::validate(&self.markers, &hosts, self.view(), &self.paths, &self.links)?;
        probes::validate(&self.probes, &hosts, self.run.duration)?;
        run::validate(&self.run, &hosts)
    }
}

/// The names a section may refer to — the hosts, or every node — and what errors call them.
/// A set, not a list: a 10 000-flow dumbbell names 20 000 hosts in 20 000 links.
struct Names<'a> {
    set: HashSet<&'a str>,
    what: &'static str,
}

impl<'a> Names<'a> {
    fn new(names: impl IntoIterator<Item = &'a String>, what: &'static str) -> Self {
        Names { set: names.into_iter().map(String::as_str).collect(), what }
    }

    /// `Ok` if `name` is one of them; otherwise the error for the key `key()` (made only then).
    fn require(&self, name: &str, key: impl FnOnce() -> String) -> Result<(), ConfigError> {
        if self.set.contains(name) {
            Ok(())
        } else {
            Err(ConfigError::invalid(key(), format!("unknown {} {name:?}", self.what)))
        }
    }
}

/// Checks that the hosts and routers have well-formed names, none used twice; returns them
/// as the nodes.
fn check_names<'a>(hosts: &'a [String], routers: &'a [String]) -> Result<Names<'a>, ConfigError> {
    let mut nodes = Names { set: HashSet::with_capacity(hosts.len() + routers.len()), what: "node" };
    for (list, key) in [(hosts, "hosts"), (routers, "routers")] {
        for (i, n) in list.iter().enumerate() {
            if n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(ConfigError::invalid(format!("{key}[{i}]"), format!("invalid name {n:?}: use letters, digits, '-' and '_'")));
            }
            if !nodes.set.insert(n.as_str()) {
                return Err(ConfigError::invalid(format!("{key}[{i}]"), format!("duplicate name {n:?}")));
            }
        }
    }
    Ok(nodes)
}

/// Where a mistake is, as an error's prefix: `file:line: `, `line N: ` without a file name,
/// `file: ` without a line.
fn location(origin: &str, line: Option<usize>) -> String {
    match line {
        Some(l) if !origin.is_empty() => format!("{origin}:{l}: "),
        Some(l) => format!("line {l}: "),
        None if !origin.is_empty() => format!("{origin}: "),
        None => String::new(),
    }
}

fn syntax_error(origin: String, key: String, message: String) -> ConfigError {
    // serde's messages can span lines (TOML shows a code excerpt); keep the first line.
    let message = message.lines().next().unwrap_or("").trim().to_string();
    let key = if key == "." || key.is_empty() { "config".to_string() } else { key };
    ConfigError::Syntax { origin, key, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_HOSTS: &str = "hosts = [\"a\", \"b\"]\n";

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = Config::from_toml(&format!("{TWO_HOSTS}[[path]]\nbetween = [\"a\", \"b\"]\nrtx = \"50ms\"\n"), "t.toml").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:4: path[0].rtx: unknown field `rtx`"), "{e}");
    }

    #[test]
    fn bad_unit_names_key_and_quotes_value() {
        let e = Config::from_toml(&format!("{TWO_HOSTS}[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"50ms\"\nabw = \"4mbt\"\n"), "t.toml").unwrap_err().to_string();
        assert!(e.contains("path[0].abw") && e.contains("\"4mbt\""), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn json_from_python_goes_through_the_same_schema() {
        let e = Config::from_json(r#"{"hosts":["a","b"],"path":[{"between":["a","b"],"rtt":50,"abw":"1mbit"}]}"#).unwrap_err().to_string();
        assert!(e.contains("path[0].rtt") && e.contains("needs a unit"), "{e}");
    }
}
