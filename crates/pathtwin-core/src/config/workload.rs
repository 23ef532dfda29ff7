//! The workload: `[[flow]]` entries — a TCP connection between two hosts (or over a
//! `[[pipe]]`), its application ([`AppKind`], a replayed connection's [`ExchangeSpec`]s) and
//! its TCP settings — and their checks: hosts, pipes, the number of connections
//! ([`MAX_CONNECTIONS`]), and the keys each application needs or does not use. Both engines
//! run it: the simulator on its own TCP endpoints, the emulator (`pathtwin_emu::workload`,
//! when asked to) as real sockets over the hosts' kernel TCP; a connection is named the same
//! in both ([`connection_labels`]).

use super::{ConfigError, Names, PipeConfig, TcpSettings};
use crate::time::Duration;
use crate::units::{Size, MAX_BYTES};
use serde::{Deserialize, Serialize};

/// Applications a flow can run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppKind {
    /// Send `bytes`, or without it as much as possible until `stop` or the end of the run.
    #[default]
    Bulk,
    /// Alternate `on` periods of bulk sending with `off` periods of silence.
    Onoff,
    /// Client sends `request` bytes, server answers `response` bytes after `server_delay`;
    /// repeated `requests` times with `think` time between.
    Reqresp,
    /// Monkey Do's re-enactment of one traced connection (`exchanges`), as
    /// `pathtwin.replay.agent` does it in the emulator.
    Replay,
}

/// One exchange of a replayed connection (`app = "replay"`), written as the array
/// `[request_bytes, response_bytes, header_bytes, server_delay, query_delay, think]`: sizes
/// in bytes, times in seconds. `header_bytes` is what the server writes first, the rest
/// following `query_delay` later; -1 (or 0, or the whole response) writes it all at once.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExchangeSpec(pub u64, pub u64, pub i64, pub f64, pub f64, pub f64);

impl ExchangeSpec {
    pub fn request_bytes(&self) -> u64 {
        self.0
    }
    pub fn response_bytes(&self) -> u64 {
        self.1
    }
    /// Bytes the server writes before the query delay; the whole response when the split
    /// is none (-1, 0 or not below the response), as the agent's server does.
    pub fn first_write(&self) -> u64 {
        match u64::try_from(self.2) {
            Ok(h) if h > 0 && h < self.1 => h,
            _ => self.1,
        }
    }
    pub fn server_delay_s(&self) -> f64 {
        self.3
    }
    pub fn query_delay_s(&self) -> f64 {
        self.4
    }
    pub fn think_s(&self) -> f64 {
        self.5
    }
}

/// `[[flow]]`: `count` TCP connections from `from` (client) to `to` (server).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub app: AppKind,
    #[serde(default)]
    pub start: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Duration>,
    /// Identical parallel connections this entry stands for.
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_delay: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u32>,
    /// `app = "replay"`: the connection's exchanges, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchanges: Option<Vec<ExchangeSpec>>,
    /// Index of the `[[pipe]]` (file order) the flow runs over, from that pipe's own client
    /// address, instead of the route between its hosts. `from` must be the pipe's client
    /// host and `to` its server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipe: Option<u32>,
    /// Shortcut for `tcp.cc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    #[serde(default)]
    pub tcp: TcpSettings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

fn one() -> u32 {
    1
}

/// Every connection's label in both engines' tables, per entry and copy: the entry's
/// `label` (with `#copy` when the entry stands for several connections), or `from->to`.
/// Entries without a label between the same two hosts (in that direction) number their
/// connections together, in file order: two entries of two copies each are `a->b#0` ..
/// `a->b#3`, so that no two rows of a table share a label. [`validate`] refuses explicit
/// labels that still collide.
pub fn connection_labels(flows: &[FlowConfig]) -> Vec<Vec<String>> {
    // Unlabelled connections per (from, to), counted in one pass: a workload may have
    // thousands of entries, and validation and both engines call this.
    let mut unlabelled: std::collections::HashMap<(&str, &str), u32> = std::collections::HashMap::new();
    for f in flows.iter().filter(|f| f.label.is_none()) {
        *unlabelled.entry((f.from.as_str(), f.to.as_str())).or_insert(0) += f.count;
    }
    let mut next: std::collections::HashMap<(&str, &str), u32> = std::collections::HashMap::new();
    flows
        .iter()
        .map(|f| match &f.label {
            Some(l) if f.count == 1 => vec![l.clone()],
            Some(l) => (0..f.count).map(|c| format!("{l}#{c}")).collect(),
            None if unlabelled[&(f.from.as_str(), f.to.as_str())] == 1 => vec![format!("{}->{}", f.from, f.to)],
            None => {
                let n = next.entry((f.from.as_str(), f.to.as_str())).or_insert(0);
                let first = *n;
                *n += f.count;
                (first..first + f.count).map(|c| format!("{}->{}#{c}", f.from, f.to)).collect()
            }
        })
        .collect()
}

/// The first two connections that [`connection_labels`] names alike: (entry, entry, label).
fn duplicate_label(flows: &[FlowConfig]) -> Option<(usize, usize, String)> {
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, labels) in connection_labels(flows).into_iter().enumerate() {
        for l in labels {
            if let Some(&j) = seen.get(&l) {
                return Some((j, i, l));
            }
            seen.insert(l, i);
        }
    }
    None
}

impl AppKind {
    /// The name a config and the `flows` table's `app` column use.
    pub fn name(self) -> &'static str {
        match self {
            AppKind::Bulk => "bulk",
            AppKind::Onoff => "onoff",
            AppKind::Reqresp => "reqresp",
            AppKind::Replay => "replay",
        }
    }
}

/// Most connections one workload may have, over all its entries' `count`s. The engines
/// count connections in `u32` and name each one ([`connection_labels`]) before running:
/// without a bound a single `count` could ask for billions of labels. A hundred times the
/// largest run benchmarked (10 000 flows).
pub const MAX_CONNECTIONS: u64 = 1_000_000;

/// Checks the `[[flow]]` entries against the hosts and the `[[pipe]]`s.
pub(super) fn validate(flows: &[FlowConfig], pipes: &[PipeConfig], hosts: &Names<'_>) -> Result<(), ConfigError> {
    let mut connections: u64 = 0;
    for (i, f) in flows.iter().enumerate() {
        hosts.require(&f.from, || format!("flow[{i}].from"))?;
        hosts.require(&f.to, || format!("flow[{i}].to"))?;
        if f.from == f.to {
            return Err(ConfigError::invalid(format!("flow[{i}].to"), "a flow needs two different hosts"));
        }
        if f.count == 0 {
            return Err(ConfigError::invalid(format!("flow[{i}].count"), "count must be at least 1"));
        }
        connections += u64::from(f.count);
        if connections > MAX_CONNECTIONS {
            return Err(ConfigError::invalid(format!("flow[{i}].count"), format!("the workload reaches {connections} connections here, more than the {MAX_CONNECTIONS} a run may have")));
        }
        if let Some(p) = f.pipe {
            let Some(pc) = pipes.get(p as usize) else {
                return Err(ConfigError::invalid(format!("flow[{i}].pipe"), format!("no pipe {p}: the config has {} [[pipe]] entries", pipes.len())));
            };
            for (key, name, end, role) in [("from", &f.from, &pc.between[1], "client"), ("to", &f.to, &pc.between[0], "server")] {
                if name != end {
                    return Err(ConfigError::invalid(format!("flow[{i}].{key}"), format!("{name:?} is not pipe {p}'s {role} host {end:?}")));
                }
            }
        }
        if let Some(stop) = f.stop {
            if stop <= f.start {
                return Err(ConfigError::invalid(format!("flow[{i}].stop"), "stop must be after start"));
            }
        }
        let needs = |field: &str, present: bool| {
            if present {
                Ok(())
            } else {
                Err(ConfigError::invalid(format!("flow[{i}].{field}"), format!("missing for app = \"{}\"", f.app.name())))
            }
        };
        let forbids = |field: &str, present: bool| {
            if present {
                Err(ConfigError::invalid(format!("flow[{i}].{field}"), format!("not used by app = \"{}\"", f.app.name())))
            } else {
                Ok(())
            }
        };
        match f.app {
            AppKind::Bulk => {
                forbids("exchanges", f.exchanges.is_some())?;
                for (k, v) in [("on", f.on.is_some()), ("off", f.off.is_some()), ("request", f.request.is_some()), ("response", f.response.is_some()), ("server_delay", f.server_delay.is_some()), ("think", f.think.is_some()), ("requests", f.requests.is_some())] {
                    forbids(k, v)?;
                }
            }
            AppKind::Onoff => {
                needs("on", f.on.is_some())?;
                needs("off", f.off.is_some())?;
                // Each period ends with the next toggle: two zero periods would toggle at the
                // same instant forever, and the engine's clock would never move on.
                for (k, v) in [("on", f.on), ("off", f.off)] {
                    if v == Some(Duration::ZERO) {
                        return Err(ConfigError::invalid(format!("flow[{i}].{k}"), "must be positive"));
                    }
                }
                for (k, v) in [("exchanges", f.exchanges.is_some()), ("request", f.request.is_some()), ("response", f.response.is_some()), ("server_delay", f.server_delay.is_some()), ("requests", f.requests.is_some())] {
                    forbids(k, v)?;
                }
            }
            AppKind::Reqresp => {
                needs("request", f.request.is_some())?;
                needs("response", f.response.is_some())?;
                for (k, v) in [("on", f.on.is_some()), ("off", f.off.is_some()), ("bytes", f.bytes.is_some()), ("exchanges", f.exchanges.is_some())] {
                    forbids(k, v)?;
                }
            }
            AppKind::Replay => {
                needs("exchanges", f.exchanges.is_some())?;
                if f.exchanges.as_ref().is_some_and(|x| x.is_empty()) {
                    return Err(ConfigError::invalid(format!("flow[{i}].exchanges"), "a replayed connection needs at least one exchange"));
                }
                // The exchanges say everything; a stop would cut a re-enactment short.
                for (k, v) in [
                    ("on", f.on.is_some()),
                    ("off", f.off.is_some()),
                    ("bytes", f.bytes.is_some()),
                    ("request", f.request.is_some()),
                    ("response", f.response.is_some()),
                    ("server_delay", f.server_delay.is_some()),
                    ("think", f.think.is_some()),
                    ("requests", f.requests.is_some()),
                    ("stop", f.stop.is_some()),
                ] {
                    forbids(k, v)?;
                }
                for (k, x) in f.exchanges.iter().flatten().enumerate() {
                    // JSON may carry any u64; TOML (`config_toml`'s output) holds up to i64::MAX.
                    for (name, v) in [("request_bytes", x.0), ("response_bytes", x.1)] {
                        if v > MAX_BYTES {
                            return Err(ConfigError::invalid(format!("flow[{i}].exchanges[{k}]"), format!("{name} {v} is above {MAX_BYTES} (1 PB)")));
                        }
                    }
                    if x.2 < -1 {
                        return Err(ConfigError::invalid(format!("flow[{i}].exchanges[{k}]"), format!("header_bytes {} is below -1 (-1: no split)", x.2)));
                    }
                    for (name, v) in [("server_delay", x.3), ("query_delay", x.4), ("think", x.5)] {
                        if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
                            return Err(ConfigError::invalid(format!("flow[{i}].exchanges[{k}]"), format!("{name} {v} s is not between 0 and 1e6 seconds")));
                        }
                    }
                }
            }
        }
    }
    if let Some((first, second, label)) = duplicate_label(flows) {
        let whose = if first == second { "another of its connections".to_string() } else { format!("flow[{first}]") };
        return Err(ConfigError::invalid(format!("flow[{second}].label"), format!("{label:?} already names {whose}: labels tell the results' rows apart")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError};

    fn labels(flows: &str) -> Result<Vec<Vec<String>>, ConfigError> {
        let cfg = Config::from_toml(&format!("hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"10ms\"\nabw = \"1mbit\"\n{flows}"), "t.toml")?;
        Ok(super::connection_labels(&cfg.flows))
    }

    #[test]
    fn every_connection_gets_a_label_of_its_own() {
        let entry = |extra: &str| format!("[[flow]]\nfrom = \"a\"\nto = \"b\"\n{extra}\n");
        // One entry: as before, `#copy` only with several copies.
        assert_eq!(labels(&entry("")).unwrap(), [["a->b"]]);
        assert_eq!(labels(&entry("count = 2")).unwrap(), [["a->b#0", "a->b#1"]]);
        // Two unlabelled entries between the same hosts number their connections together.
        assert_eq!(labels(&(entry("count = 2") + &entry("count = 2"))).unwrap(), [["a->b#0", "a->b#1"], ["a->b#2", "a->b#3"]]);
        assert_eq!(labels(&(entry("") + &entry(""))).unwrap(), [["a->b#0"], ["a->b#1"]]);
        // The other direction and labelled entries are counted apart.
        let mixed = entry("") + "[[flow]]\nfrom = \"b\"\nto = \"a\"\n" + &entry("label = \"web\"\ncount = 2") + &entry("");
        assert_eq!(labels(&mixed).unwrap(), vec![vec!["a->b#0"], vec!["b->a"], vec!["web#0", "web#1"], vec!["a->b#1"]]);
        // Labels a user gave twice, or that meet an automatic one, are refused by name.
        let err = |flows: &str| labels(flows).unwrap_err().to_string();
        assert_eq!(err(&(entry("label = \"web\"") + &entry("label = \"web\""))), "flow[1].label: \"web\" already names flow[0]: labels tell the results' rows apart");
        assert_eq!(err(&(entry("") + &entry("label = \"a->b\""))), "flow[1].label: \"a->b\" already names flow[0]: labels tell the results' rows apart");
        assert_eq!(err(&(entry("label = \"x#1\"") + &entry("label = \"x\"\ncount = 2"))), "flow[1].label: \"x#1\" already names flow[0]: labels tell the results' rows apart");
    }

    /// A server, a client host with two pipes, and one flow whose keys are `flow`.
    fn pipe_flow(flow: &str) -> Result<Config, ConfigError> {
        let pipe = "[[pipe]]\nbetween = [\"srv\", \"cli\"]\nrtt = \"40ms\"\nrate = \"1mbit\"\n";
        Config::from_toml(&format!("hosts = [\"srv\", \"cli\", \"other\"]\n{pipe}{pipe}[[flow]]\n{flow}\n"), "t.toml")
    }

    const REPLAY: &str = "app = \"replay\"\nexchanges = [[300, 5000, -1, 0.01, 0.0, 0.0]]";

    #[test]
    fn a_pipe_flow_names_an_existing_pipe_from_its_client_to_its_server() {
        let ok = pipe_flow(&format!("from = \"cli\"\nto = \"srv\"\npipe = 1\n{REPLAY}")).unwrap();
        assert_eq!(ok.flows[0].pipe, Some(1));
        assert_eq!(ok.flows[0].exchanges.as_ref().unwrap()[0].first_write(), 5000);
        let err = |flow: &str| pipe_flow(flow).unwrap_err().to_string();
        assert_eq!(err(&format!("from = \"cli\"\nto = \"srv\"\npipe = 2\n{REPLAY}")), "flow[0].pipe: no pipe 2: the config has 2 [[pipe]] entries");
        assert_eq!(err(&format!("from = \"other\"\nto = \"srv\"\npipe = 0\n{REPLAY}")), "flow[0].from: \"other\" is not pipe 0's client host \"cli\"");
        assert_eq!(err(&format!("from = \"cli\"\nto = \"other\"\npipe = 0\n{REPLAY}")), "flow[0].to: \"other\" is not pipe 0's server host \"srv\"");
        // Reversed: the server cannot open a pipe flow.
        assert_eq!(err(&format!("from = \"srv\"\nto = \"cli\"\npipe = 0\n{REPLAY}")), "flow[0].from: \"srv\" is not pipe 0's client host \"cli\"");
        let e = err("from = \"cli\"\nto = \"srv\"\npipe = -1");
        assert!(e.contains("flow[0].pipe") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn replay_flows_need_well_formed_exchanges() {
        let err = |flow: &str| pipe_flow(&format!("from = \"cli\"\nto = \"srv\"\npipe = 0\n{flow}")).unwrap_err().to_string();
        assert_eq!(err("app = \"replay\""), "flow[0].exchanges: missing for app = \"replay\"");
        assert_eq!(err("app = \"replay\"\nexchanges = []"), "flow[0].exchanges: a replayed connection needs at least one exchange");
        assert_eq!(err("app = \"replay\"\nexchanges = [[1, 1, -2, 0.0, 0.0, 0.0]]"), "flow[0].exchanges[0]: header_bytes -2 is below -1 (-1: no split)");
        assert_eq!(err("app = \"replay\"\nexchanges = [[1, 1, -1, 0.0, 0.0, 0.0], [1, 1, -1, 0.0, -0.5, 0.0]]"), "flow[0].exchanges[1]: query_delay -0.5 s is not between 0 and 1e6 seconds");
        assert_eq!(err(&format!("{REPLAY}\nstop = \"5s\"")), "flow[0].stop: not used by app = \"replay\"");
        assert_eq!(err(&format!("{REPLAY}\nrequest = \"300B\"")), "flow[0].request: not used by app = \"replay\"");
        assert_eq!(err("exchanges = [[1, 1, -1, 0.0, 0.0, 0.0]]"), "flow[0].exchanges: not used by app = \"bulk\"");
        assert!(err("app = \"replay\"\nexchanges = [[1, 1, -1, 0.0, 0.0]]").contains("flow[0].exchanges[0]"));
    }

    #[test]
    fn flow_fields_are_checked_against_the_app() {
        let e = Config::from_toml("hosts = [\"a\", \"b\"]\n[[flow]]\nfrom = \"a\"\nto = \"b\"\napp = \"reqresp\"\nrequest = \"300B\"\n", "t.toml").unwrap_err().to_string();
        assert_eq!(e, "flow[0].response: missing for app = \"reqresp\"");
    }
}
