//! The config schema — defined once, here — and its loading with one-line errors.
//!
//! A file describes a topology in one of two views and, optionally, a workload:
//! - **paths** (NSDI'09): `hosts = [...]`, `[[path]]` per host pair (base RTT, ABW or a
//!   reactivity table per direction, capacity, queue, mode, loss), `[[shared]]` bottleneck
//!   classes;
//! - **links** (router level): `hosts`, `routers`, `[[link]]` with rate, one-way delay, queue;
//! - workload (simulator): `[run]`, `[tcp]` defaults and `[[flow]]` entries; the emulator
//!   ignores `[[flow]]`, as real applications are its workload;
//! - `[[marker]]` DiffServ markers in either view (schema in `marker::config`).
//!
//! Per-direction values are written once for both directions (`"10mbit"`), as
//! `"a_to_b/b_to_a"`, or as a two-element array; the first value is the direction from
//! `between[0]` to `between[1]`.
//!
//! Errors name the key (`path[0].rtt`), the line when the text is TOML, and quote the value.
//! Python passes dicts as JSON through [`Config::from_json`]; the schema is never restated
//! elsewhere.

use crate::qdisc::{FrioParams, RioParams};
use crate::time::Duration;
use crate::units::{Fraction, QueueLimit, Rate, Size};
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

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

/// A value given per direction: `[a→b, b→a]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerDirection<T>(pub [T; 2]);

impl<T: Copy> PerDirection<T> {
    pub fn both(v: T) -> Self {
        PerDirection([v, v])
    }
    pub fn get(&self, direction: usize) -> T {
        self.0[direction]
    }
}

impl<'de, T> Deserialize<'de> for PerDirection<T>
where
    T: Deserialize<'de> + FromStr + Copy,
    T::Err: fmt::Display,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T> de::Visitor<'de> for V<T>
        where
            T: Deserialize<'de> + FromStr + Copy,
            T::Err: fmt::Display,
        {
            type Value = PerDirection<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a value for both directions, \"a_to_b/b_to_a\", or a two-element array")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                let parse = |t: &str| t.trim().parse::<T>().map_err(E::custom);
                match s.split_once('/') {
                    Some((a, b)) => Ok(PerDirection([parse(a)?, parse(b)?])),
                    None => Ok(PerDirection::both(parse(s)?)),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                T::deserialize(de::value::F64Deserializer::<E>::new(v)).map(PerDirection::both)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                T::deserialize(de::value::I64Deserializer::<E>::new(v)).map(PerDirection::both)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                T::deserialize(de::value::U64Deserializer::<E>::new(v)).map(PerDirection::both)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let a: T = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let b: T = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<T>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(PerDirection([a, b]))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<T: Serialize> Serialize for PerDirection<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

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

/// Queue discipline of a bandwidth queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QdiscKind {
    #[default]
    Droptail,
    /// RED with the parameters of the entry's `red` table.
    Red,
    /// RIO (Clark & Fang 1998) with the entry's `rio` table, or ns-2's defaults without one.
    Rio,
    /// FRIO: RIO plus FRED-style per-flow accounting for OUT packets (`rio` and `frio`
    /// tables, both optional).
    Frio,
    /// Strict priority by the packets' band (Monaco's control packets first).
    Prio,
}

/// `red = { ... }` of a `[[path]]` or `[[link]]` with `qdisc = "red"`: the thresholds are
/// required (in packets, `"5p"`, or bytes, `"30KB"`, both in the same unit); the rest default
/// to Floyd & Jacobson's and ns-2's values (`qdisc::RedParams::with_thresholds`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedSettings {
    pub min_th: QueueLimit,
    pub max_th: QueueLimit,
    /// Drop probability at max_th (default 0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_p: Option<f64>,
    /// Weight of the average queue (default 0.002).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_q: Option<f64>,
    /// Gentle RED between max_th and 2·max_th (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gentle: Option<bool>,
    /// ns-2's `wait_` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
    /// Drop probability scaled by packet size (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_mode: Option<bool>,
    /// Mean packet size for the idle decay and byte mode (default 500 B, as ns-2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_packet: Option<Size>,
    /// Mark ECN-capable packets instead of early drops (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
    /// Adaptive RED (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<bool>,
    /// Never drop while the queue holds at most one packet, as ns-2.35's RED (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_queue_exempt: Option<bool>,
}

impl RedSettings {
    /// Checks the values for the entry named `key` (`link[0].red`).
    pub fn validate(&self, key: &str) -> Result<(), ConfigError> {
        check_thresholds(self.min_th, self.max_th, key)?;
        for (field, v) in [("max_p", self.max_p), ("w_q", self.w_q)] {
            check_probability(v, &format!("{key}.{field}"))?;
        }
        check_mean_packet(self.mean_packet, key)
    }
}

/// min_th below max_th, both packets or both bytes.
fn check_thresholds(min_th: QueueLimit, max_th: QueueLimit, key: &str) -> Result<(), ConfigError> {
    if !same_unit(min_th, max_th) {
        return Err(ConfigError::invalid(format!("{key}.max_th"), "min_th and max_th must both be packets or both bytes"));
    }
    if limit_value(min_th) >= limit_value(max_th) {
        return Err(ConfigError::invalid(format!("{key}.max_th"), "must be above min_th"));
    }
    Ok(())
}

fn same_unit(a: QueueLimit, b: QueueLimit) -> bool {
    matches!((a, b), (QueueLimit::Packets(_), QueueLimit::Packets(_)) | (QueueLimit::Bytes(_), QueueLimit::Bytes(_)))
}

fn limit_value(q: QueueLimit) -> u64 {
    match q {
        QueueLimit::Packets(v) | QueueLimit::Bytes(v) => v,
    }
}

/// A probability or weight in (0, 1], if given.
fn check_probability(v: Option<f64>, key: &str) -> Result<(), ConfigError> {
    match v {
        Some(v) if !(v > 0.0 && v <= 1.0) => Err(ConfigError::invalid(key, format!("{v} must be in (0, 1]"))),
        _ => Ok(()),
    }
}

fn check_mean_packet(m: Option<Size>, key: &str) -> Result<(), ConfigError> {
    if m.is_some_and(|m| m.bytes() == 0) {
        return Err(ConfigError::invalid(format!("{key}.mean_packet"), "must be positive"));
    }
    Ok(())
}

/// One drop precedence of a `rio` table: `in = { min_th = "15p", max_th = "30p", max_p = 0.02 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RioClassSettings {
    pub min_th: QueueLimit,
    pub max_th: QueueLimit,
    /// Drop probability at max_th (default ns-2's: IN 0.02, OUT 0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_p: Option<f64>,
}

/// `rio = { ... }` of an entry with `qdisc = "rio"` or `"frio"`. Every key is optional: a
/// missing class takes ns-2's RIO defaults (IN 15/30 packets, max_p 0.02; OUT 5/15 packets,
/// max_p 0.2), the rest RED's defaults (`qdisc::RedParams::with_thresholds`, w_q 0.002).
/// The thresholds of both classes count packets or bytes, the same for both (they are
/// compared with averages of one queue). `w_q`, `gentle`, `wait`, `byte_mode`,
/// `mean_packet` and `ecn` apply to both classes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RioSettings {
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    pub in_class: Option<RioClassSettings>,
    #[serde(default, rename = "out", skip_serializing_if = "Option::is_none")]
    pub out_class: Option<RioClassSettings>,
    /// RIO-C, OUT tested on the whole queue's average (default true); false: on the OUT
    /// packets' own average (ns-2's `rio_d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coupled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_q: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gentle: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_packet: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
}

impl RioSettings {
    /// Checks the values for the entry named `key` (`link[0].rio`).
    pub fn validate(&self, key: &str) -> Result<(), ConfigError> {
        let mut unit = None;
        for (name, class) in [("in", &self.in_class), ("out", &self.out_class)] {
            let Some(c) = class else { continue };
            let k = format!("{key}.{name}");
            check_thresholds(c.min_th, c.max_th, &k)?;
            check_probability(c.max_p, &format!("{k}.max_p"))?;
            match unit {
                Some(u) if !same_unit(u, c.min_th) => {
                    return Err(ConfigError::invalid(format!("{k}.min_th"), "in and out thresholds must both be packets or both bytes"));
                }
                _ => unit = Some(c.min_th),
            }
        }
        if self.in_class.is_some() != self.out_class.is_some() && unit.is_some_and(|u| matches!(u, QueueLimit::Bytes(_))) {
            let missing = if self.in_class.is_none() { "in" } else { "out" };
            return Err(ConfigError::invalid(format!("{key}.{missing}"), "byte thresholds need both classes (the default is in packets)"));
        }
        check_probability(self.w_q, &format!("{key}.w_q"))?;
        check_mean_packet(self.mean_packet, key)
    }
}

/// `frio = { min_q = 2, max_q = 20 }` of an entry with `qdisc = "frio"`: FRED's per-flow
/// limits in packets. min_q defaults to 2 (Lin & Morris); max_q to FRED's choice, the OUT
/// min_th in packets (bytes: divided by the mean packet size, rounded up).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrioSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_q: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_q: Option<u32>,
}

/// The queue-discipline keys of one entry, as written.
#[derive(Clone, Copy, Debug)]
pub struct QdiscSpec<'a> {
    pub kind: QdiscKind,
    pub red: Option<&'a RedSettings>,
    pub rio: Option<&'a RioSettings>,
    pub frio: Option<&'a FrioSettings>,
}

/// Checks that an entry's `red`, `rio` and `frio` tables and its `qdisc` go together.
fn check_qdisc(q: QdiscSpec<'_>, key: &str) -> Result<(), ConfigError> {
    match (q.kind, q.red) {
        (QdiscKind::Red, Some(r)) => r.validate(&format!("{key}.red"))?,
        (QdiscKind::Red, None) => return Err(ConfigError::invalid(format!("{key}.red"), "qdisc = \"red\" needs a red = { min_th = ..., max_th = ... } table")),
        (_, Some(_)) => return Err(ConfigError::invalid(format!("{key}.red"), "a red table needs qdisc = \"red\"")),
        (_, None) => {}
    }
    match (q.kind, q.rio) {
        (QdiscKind::Rio | QdiscKind::Frio, Some(r)) => r.validate(&format!("{key}.rio"))?,
        (_, Some(_)) => return Err(ConfigError::invalid(format!("{key}.rio"), "a rio table needs qdisc = \"rio\" or \"frio\"")),
        (_, None) => {}
    }
    match (q.kind, q.frio) {
        (QdiscKind::Frio, _) => {
            let f = FrioParams::from_settings(q.frio, &RioParams::from_settings(q.rio));
            let (min_q, max_q) = (f.min_q, f.max_q);
            if max_q <= min_q {
                let which = if q.frio.is_some_and(|f| f.max_q.is_some()) { "max_q" } else { "min_q" };
                return Err(ConfigError::invalid(format!("{key}.frio.{which}"), format!("max_q ({max_q}) must be above min_q ({min_q})")));
            }
        }
        (_, Some(_)) => return Err(ConfigError::invalid(format!("{key}.frio"), "a frio table needs qdisc = \"frio\"")),
        (_, None) => {}
    }
    Ok(())
}

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

/// `[tcp.vegas]`: Vegas's thresholds (Brakmo & Peterson 1995), in packets queued at the
/// bottleneck. Unset fields come from `preset`; without one, from `"ns2"`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VegasSettings {
    /// `"ns2"`: α = 1, β = 3, γ = 1 (Brakmo & Peterson, ns-2); `"linux"`: α = 2, β = 4,
    /// γ = 1 (Linux, ns-3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<VegasPreset>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    /// Vegas-k: the base RTT is the minimum of the last k RTT samples instead of all of them
    /// (ACC paper §III-A).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_rtt_window: Option<u32>,
    /// Which RTT of a round congestion avoidance reads: `"mean"` (ns-2; the `ns2` preset's)
    /// or `"min"` (Linux; the `linux` preset's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_rtt: Option<RoundRttName>,
    /// Whose reading of the paper fills in rounds, rounding and growth: `"linux"` (the
    /// default, for both presets) or `"ns2"` (ns-2's `tcp-vegas.cc`: whole-segment diff,
    /// growth spread over the next round, slow start left with an eighth off). ns-2's rules
    /// assume an ACK per segment, as ns-2's TCPSink sends: use them with `delayed_ack = false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<VegasRulesName>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoundRttName {
    Mean,
    Min,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VegasRulesName {
    Ns2,
    Linux,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VegasPreset {
    Ns2,
    Linux,
}

/// `[tcp.cubic]`: CUBIC's constants (RFC 9438). Unset fields come from `preset`; without
/// one, from `"rfc9438"`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CubicSettings {
    /// `"rfc9438"`: C = 0.4, β = 0.7; `"linux-2.6"`: β = 819/1024, as the 2.6-era code,
    /// without HyStart; `"ns2"`: `"linux-2.6"` as ns-2.35's port runs it (no look-ahead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<CubicPreset>,
    /// C, in segments per second cubed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c: Option<f64>,
    /// Multiplicative decrease factor β (the window after a loss is β·cwnd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_convergence: Option<bool>,
    /// The Reno-friendly region (RFC 9438 §4.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reno_friendly: Option<bool>,
    /// HyStart in slow start (on by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hystart: Option<bool>,
    /// Aim at the cubic curve one round trip ahead (RFC 9438 §4.2; on by default, off in
    /// the `"ns2"` preset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_lookahead: Option<bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CubicPreset {
    #[serde(rename = "rfc9438")]
    Rfc9438,
    #[serde(rename = "linux-2.6")]
    Linux26,
    #[serde(rename = "ns2")]
    Ns2,
}

/// `[tcp.bic]`: BIC's constants; unset fields keep Linux 2.6's `tcp_bic.c` values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BicSettings {
    /// Multiplicative decrease factor (Linux: 819/1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// Below this window (segments) BIC grows as Reno (Linux: 14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_window: Option<u32>,
    /// Largest increase per RTT in segments (Linux: 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_increment: Option<u32>,
    /// RTTs over which the window approaches W_max when close to it (Linux: 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smooth_part: Option<u32>,
    /// The binary search's divisor, `BICTCP_B` (Linux: 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_convergence: Option<bool>,
}

/// `[tcp.monaco]`: Monaco's gain and target (ACC paper eq. 13); unset fields keep the
/// paper's K = 0.5 and a* = 3 packets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonacoSettings {
    /// Proportional gain K, in (0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<f64>,
    /// Target accumulation a* in segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// Start in slow start until the accumulation reaches the target (default false, as the
    /// paper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_start: Option<bool>,
}

/// NewReno's retransmission timer during fast recovery without SACK (RFC 6582 §3.2 step 5):
/// `"impatient"` (the default) or `"slow-but-steady"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NewRenoTimerName {
    Impatient,
    SlowButSteady,
}

/// TCP settings; every field optional so that `[tcp]` and a flow's `tcp` can override.
///
/// `cc` names a congestion controller of the engine that runs the flow: the simulator's own
/// (`pathtwin_tcp`'s list) in `sim`, the kernel's (`reno`, `cubic`, `bbr`, whatever the
/// machine offers) in `emu`; each engine checks the name and says which names it has. The
/// controller's parameters sit in one table per controller (`[tcp.vegas]`, `[tcp.cubic]`,
/// `[tcp.bic]`, `[tcp.monaco]`), used by whichever flows run that controller; an engine that cannot honour
/// them (the emulator runs the kernel's code) rejects them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vegas: Option<VegasSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cubic: Option<CubicSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bic: Option<BicSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monaco: Option<MonacoSettings>,
    /// Maximum segment size in bytes of payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sack: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delayed_ack: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delayed_ack_timeout: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rto: Option<Duration>,
    /// Initial window in segments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_window: Option<u32>,
    /// w_max: the largest flight the sender allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_window: Option<Size>,
    /// Receive buffer the receiver advertises.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcv_window: Option<Size>,
    /// RACK time-based loss detection (RFC 8985), with SACK; default on, as in Linux.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rack: Option<bool>,
    /// Tail loss probes (RFC 8985 §7), with SACK; default on, as in Linux.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tlp: Option<bool>,
    /// With SACK and without RACK: deem a retransmission lost once data sent after it is
    /// SACKed (Linux 2.6's `tcp_mark_lost_retrans`); default off (RFC 6675).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_retransmit: Option<bool>,
    /// ns-2 mimicry: restart the retransmission timer on every ACK, duplicate ACKs included,
    /// as ns-2's `Agent/TCP/Linux` does (neither RFC 6298 nor Linux); default off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns2_rto_restart_every_ack: Option<bool>,
    /// Duplicate ACKs (with SACK: SACKed segments above a hole) that start fast
    /// retransmit, RFC 5681/6675 DupThresh; default 3.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dupack_threshold: Option<u32>,
    /// NewReno without SACK: restart the retransmission timer on the first partial ACK of a
    /// recovery only (`"impatient"`, default) or on every one (`"slow-but-steady"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newreno_timer: Option<NewRenoTimerName>,
    /// Ask for ECN (RFC 3168) in the SYN; default off. Either way a server accepts ECN when
    /// asked, as Linux's default `net.ipv4.tcp_ecn = 2`. RED with `ecn = true` then marks
    /// instead of dropping early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
}

impl TcpSettings {
    /// Each per-controller table by name, and whether this section sets it.
    pub fn controller_tables(&self) -> [(&'static str, bool); 4] {
        [("vegas", self.vegas.is_some()), ("cubic", self.cubic.is_some()), ("bic", self.bic.is_some()), ("monaco", self.monaco.is_some())]
    }

    /// `self` with every field that `over` sets replaced.
    pub fn overridden_by(&self, over: &TcpSettings) -> TcpSettings {
        TcpSettings {
            cc: over.cc.clone().or_else(|| self.cc.clone()),
            vegas: over.vegas.clone().or_else(|| self.vegas.clone()),
            cubic: over.cubic.clone().or_else(|| self.cubic.clone()),
            bic: over.bic.clone().or_else(|| self.bic.clone()),
            monaco: over.monaco.clone().or_else(|| self.monaco.clone()),
            mss: over.mss.or(self.mss),
            sack: over.sack.or(self.sack),
            delayed_ack: over.delayed_ack.or(self.delayed_ack),
            delayed_ack_timeout: over.delayed_ack_timeout.or(self.delayed_ack_timeout),
            min_rto: over.min_rto.or(self.min_rto),
            initial_window: over.initial_window.or(self.initial_window),
            max_window: over.max_window.or(self.max_window),
            rcv_window: over.rcv_window.or(self.rcv_window),
            rack: over.rack.or(self.rack),
            tlp: over.tlp.or(self.tlp),
            lost_retransmit: over.lost_retransmit.or(self.lost_retransmit),
            ns2_rto_restart_every_ack: over.ns2_rto_restart_every_ack.or(self.ns2_rto_restart_every_ack),
            dupack_threshold: over.dupack_threshold.or(self.dupack_threshold),
            newreno_timer: over.newreno_timer.or(self.newreno_timer),
            ecn: over.ecn.or(self.ecn),
        }
    }
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
    /// How long a reordered packet is held (default [`DEFAULT_REORDER_DELAY`]).
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

/// `[[link]]`: a duplex link between two nodes (links view).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub between: [String; 2],
    pub rate: PerDirection<Rate>,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Queue of each direction's output port (default 100 packets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<PerDirection<QueueLimit>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<PerDirection<Fraction>>,
    /// Share of packets held back `reorder_delay` in each direction, so that later ones
    /// overtake them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<PerDirection<Fraction>>,
    /// How long a reordered packet is held (default [`DEFAULT_REORDER_DELAY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_delay: Option<Duration>,
    #[serde(default)]
    pub qdisc: QdiscKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red: Option<RedSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rio: Option<RioSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frio: Option<FrioSettings>,
}

/// What Monarch's proxy sends the remote host for each of the sender's packets (see
/// `pathtwin_emu::monarch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeKind {
    /// An ACK to a closed TCP port; answered by a RST.
    TcpAck,
    /// A datagram to a closed UDP port; answered by ICMP port unreachable.
    Udp,
    /// An ICMP echo request of the packet's size; answered by an echo reply as large.
    IcmpEcho,
    /// An ICMP timestamp request (fixed size); answered by a timestamp reply.
    IcmpTimestamp,
}

/// `[monarch]`: Monarch (Haeberlen et al., IMC 2006): the packets `sender` sends to
/// `receiver` are carried as probes to `target` and its answers, across the route between
/// `sender` and `target`; `receiver`'s packets go straight back to `sender` unless a path or
/// link between them says otherwise (emulator only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonarchConfig {
    pub sender: String,
    pub receiver: String,
    pub target: String,
    #[serde(default = "default_probe")]
    pub probe: ProbeKind,
    /// IP IDs of the target's packets: its kernel's own (Linux: zero on RSTs, and a random
    /// step after each pause), or `sequential` — one counter over everything the target
    /// sends, as the hosts of Monarch's paper had, stamped as they leave it.
    #[serde(default)]
    pub target_ip_ids: TargetIpIds,
}

/// How the Monarch target's IP IDs are made (see [`MonarchConfig::target_ip_ids`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetIpIds {
    #[default]
    Kernel,
    Sequential,
}

fn default_probe() -> ProbeKind {
    ProbeKind::TcpAck
}

/// How long a reordered packet is held when `reorder_delay` is not given: a few packet
/// times on a broadband link, enough to be overtaken by the packets behind it.
pub const DEFAULT_REORDER_DELAY: Duration = Duration::from_millis(5);

/// Most pipes one client host can hold (its pipe addresses are one /16).
pub const MAX_PIPES_PER_HOST: usize = 65_000;

/// `[[pipe]]`: Monkey Do's per-connection network (Cheng et al., USENIX ATC 2004, §4.1): a
/// Dummynet-style pair of pipes between a server host and *one address* of a client host.
/// A host named as the client of pipes gets one extra address per pipe (the n-th pipe of
/// that host, in file order, owns its n-th address), so thousands of connections, each from
/// its own address, each cross their own path while all their sockets live in one host.
/// Each direction is a bandwidth queue (drop-tail) holding the direction's half of `rtt`,
/// then random loss, as a `[[link]]` direction is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipeConfig {
    /// `[server, client host]`; per-direction values are `[down, up]`, server to client
    /// first.
    pub between: [String; 2],
    /// Base RTT, split evenly between the directions.
    pub rtt: Duration,
    /// Bottleneck rate of each direction.
    pub rate: PerDirection<Rate>,
    /// Queue of each direction; by default Monkey's rule on the downstream rate
    /// ([`crate::topology::monkey_pipe_queues`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<PerDirection<QueueLimit>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<PerDirection<Fraction>>,
}

impl PathConfig {
    pub fn qdisc_spec(&self) -> QdiscSpec<'_> {
        QdiscSpec { kind: self.qdisc, red: self.red.as_ref(), rio: self.rio.as_ref(), frio: self.frio.as_ref() }
    }
}

impl LinkConfig {
    pub fn qdisc_spec(&self) -> QdiscSpec<'_> {
        QdiscSpec { kind: self.qdisc, red: self.red.as_ref(), rio: self.rio.as_ref(), frio: self.frio.as_ref() }
    }
}

/// Applications a simulated flow can run.
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

/// `[[flow]]`: a simulated TCP connection from `from` (client) to `to` (server).
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
    /// DiffServ markers (`crate::marker::config`).
    #[serde(default, rename = "marker", skip_serializing_if = "Vec::is_empty")]
    pub markers: Vec<crate::marker::config::MarkerConfig>,
}

impl Config {
    /// Parses TOML text; `origin` (a file name) prefixes errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let de = toml::Deserializer::new(text);
        let cfg: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let line = inner.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let origin = match line {
                Some(l) if !origin.is_empty() => format!("{origin}:{l}: "),
                Some(l) => format!("line {l}: "),
                None if !origin.is_empty() => format!("{origin}: "),
                None => String::new(),
            };
            syntax_error(origin, key, inner.message().to_string())
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parses JSON text (how Python passes dicts).
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let cfg: Config = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let key = e.path().to_string();
            syntax_error(String::new(), key, e.into_inner().to_string())
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

    /// Checks everything that does not need compilation: names, views, per-flow fields.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut names = std::collections::BTreeSet::new();
        for (list, key) in [(&self.hosts, "hosts"), (&self.routers, "routers")] {
            for (i, n) in list.iter().enumerate() {
                if n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                    return Err(ConfigError::invalid(format!("{key}[{i}]"), format!("invalid name {n:?}: use letters, digits, '-' and '_'")));
                }
                if !names.insert(n.as_str()) {
                    return Err(ConfigError::invalid(format!("{key}[{i}]"), format!("duplicate name {n:?}")));
                }
            }
        }
        if !self.paths.is_empty() && !self.links.is_empty() {
            return Err(ConfigError::invalid("link", "a file uses either [[path]] (paths view) or [[link]] (links view), not both"));
        }
        if !self.routers.is_empty() && self.links.is_empty() {
            return Err(ConfigError::invalid("routers", "routers need [[link]] entries (links view)"));
        }
        // Sets, not list scans: a 10 000-flow dumbbell names 20 000 hosts in 20 000 links.
        let hosts: std::collections::HashSet<&str> = self.hosts.iter().map(String::as_str).collect();
        let is_host = |n: &str| hosts.contains(n);
        let is_node = |n: &str| names.contains(n);
        let unknown = |key: String, n: &str, what: &str| ConfigError::invalid(key, format!("unknown {what} {n:?}"));
        for (i, p) in self.paths.iter().enumerate() {
            for (j, h) in p.between.iter().enumerate() {
                if !is_host(h) {
                    return Err(unknown(format!("path[{i}].between[{j}]"), h, "host"));
                }
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
            check_qdisc(p.qdisc_spec(), &format!("path[{i}]"))?;
        }
        for (i, s) in self.shared.iter().enumerate() {
            if !is_host(&s.source) {
                return Err(unknown(format!("shared[{i}].source"), &s.source, "host"));
            }
            for (j, d) in s.destinations.iter().enumerate() {
                if !is_host(d) {
                    return Err(unknown(format!("shared[{i}].destinations[{j}]"), d, "host"));
                }
            }
            if s.destinations.len() < 2 {
                return Err(ConfigError::invalid(format!("shared[{i}].destinations"), "a shared bottleneck needs at least two destinations"));
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            for (j, n) in l.between.iter().enumerate() {
                if !is_node(n) {
                    return Err(unknown(format!("link[{i}].between[{j}]"), n, "node"));
                }
            }
            for d in 0..2 {
                if l.rate.get(d).bps() == 0 {
                    return Err(ConfigError::invalid(format!("link[{i}].rate"), "rate must be positive"));
                }
            }
            check_qdisc(l.qdisc_spec(), &format!("link[{i}]"))?;
        }
        for (i, p) in self.pipes.iter().enumerate() {
            for (j, h) in p.between.iter().enumerate() {
                if !is_host(h) {
                    return Err(unknown(format!("pipe[{i}].between[{j}]"), h, "host"));
                }
            }
            if p.between[0] == p.between[1] {
                return Err(ConfigError::invalid(format!("pipe[{i}].between"), "a pipe needs two different hosts"));
            }
            for d in 0..2 {
                if p.rate.get(d).bps() == 0 {
                    return Err(ConfigError::invalid(format!("pipe[{i}].rate"), "rate must be positive"));
                }
            }
        }
        let mut per_client: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, p) in self.pipes.iter().enumerate() {
            let n = per_client.entry(p.between[1].as_str()).or_default();
            *n += 1;
            if *n > MAX_PIPES_PER_HOST {
                return Err(ConfigError::invalid(format!("pipe[{i}]"), format!("host {:?} has more than {MAX_PIPES_PER_HOST} pipes", p.between[1])));
            }
        }
        let pipe_servers: std::collections::BTreeSet<&str> = self.pipes.iter().map(|p| p.between[0].as_str()).collect();
        if let Some((i, p)) = self.pipes.iter().enumerate().find(|(_, p)| pipe_servers.contains(p.between[1].as_str())) {
            return Err(ConfigError::invalid(
                format!("pipe[{i}].between[1]"),
                format!("{:?} is the server of other pipes; a host is either a pipe server or a pipe client", p.between[1]),
            ));
        }
        if let Some(m) = &self.monarch {
            for (key, h) in [("sender", &m.sender), ("receiver", &m.receiver), ("target", &m.target)] {
                if !is_host(h) {
                    return Err(unknown(format!("monarch.{key}"), h, "host"));
                }
            }
            if m.sender == m.receiver || m.sender == m.target || m.receiver == m.target {
                return Err(ConfigError::invalid("monarch", "sender, receiver and target must be three different hosts"));
            }
        }
        for (i, f) in self.flows.iter().enumerate() {
            if !is_host(&f.from) {
                return Err(unknown(format!("flow[{i}].from"), &f.from, "host"));
            }
            if !is_host(&f.to) {
                return Err(unknown(format!("flow[{i}].to"), &f.to, "host"));
            }
            if f.from == f.to {
                return Err(ConfigError::invalid(format!("flow[{i}].to"), "a flow needs two different hosts"));
            }
            if f.count == 0 {
                return Err(ConfigError::invalid(format!("flow[{i}].count"), "count must be at least 1"));
            }
            if let Some(p) = f.pipe {
                let Some(pc) = self.pipes.get(p as usize) else {
                    return Err(ConfigError::invalid(format!("flow[{i}].pipe"), format!("no pipe {p}: the config has {} [[pipe]] entries", self.pipes.len())));
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
                    Err(ConfigError::invalid(format!("flow[{i}].{field}"), format!("missing for app = \"{}\"", app_name(f.app))))
                }
            };
            let forbids = |field: &str, present: bool| {
                if present {
                    Err(ConfigError::invalid(format!("flow[{i}].{field}"), format!("not used by app = \"{}\"", app_name(f.app))))
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
        for (i, m) in self.markers.iter().enumerate() {
            m.validate(i, self)?;
        }
        for (i, h) in self.run.pcap.iter().enumerate() {
            if !is_host(h) {
                return Err(unknown(format!("run.pcap[{i}]"), h, "host"));
            }
        }
        if self.run.sample_interval.as_nanos() == 0 {
            return Err(ConfigError::invalid("run.sample_interval", "must be positive"));
        }
        Ok(())
    }
}

fn syntax_error(origin: String, key: String, message: String) -> ConfigError {
    // serde's messages can span lines (TOML shows a code excerpt); keep the first line.
    let message = message.lines().next().unwrap_or("").trim().to_string();
    let key = if key == "." || key.is_empty() { "config".to_string() } else { key };
    ConfigError::Syntax { origin, key, message }
}

fn app_name(a: AppKind) -> &'static str {
    match a {
        AppKind::Bulk => "bulk",
        AppKind::Onoff => "onoff",
        AppKind::Reqresp => "reqresp",
        AppKind::Replay => "replay",
    }
}

/// Which topology view a config uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Paths,
    Links,
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_HOSTS: &str = "hosts = [\"a\", \"b\"]\n";

    #[test]
    fn per_direction_values_accept_three_spellings() {
        let cfg = Config::from_toml(
            &format!("{TWO_HOSTS}[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"50ms\"\nabw = \"4.3mbit/409kbit\"\ncapacity = [\"100mbit\", \"50mbit\"]\nloss = \"1%\"\n"),
            "t.toml",
        )
        .unwrap();
        let p = &cfg.paths[0];
        assert_eq!(p.abw.unwrap().0, [Rate::from_kbps(4300), Rate::from_kbps(409)]);
        assert_eq!(p.capacity.unwrap().0, [Rate::from_mbps(100), Rate::from_mbps(50)]);
        assert_eq!(p.loss.unwrap().get(1).get(), 0.01);
    }

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
    fn unknown_host_is_named() {
        let e = Config::from_toml(&format!("{TWO_HOSTS}[[path]]\nbetween = [\"a\", \"c\"]\nrtt = \"50ms\"\nabw = \"1mbit\"\n"), "t.toml").unwrap_err().to_string();
        assert_eq!(e, "path[0].between[1]: unknown host \"c\"");
    }

    #[test]
    fn json_from_python_goes_through_the_same_schema() {
        let e = Config::from_json(r#"{"hosts":["a","b"],"path":[{"between":["a","b"],"rtt":50,"abw":"1mbit"}]}"#).unwrap_err().to_string();
        assert!(e.contains("path[0].rtt") && e.contains("needs a unit"), "{e}");
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
        let e = Config::from_toml(&format!("{TWO_HOSTS}[[flow]]\nfrom = \"a\"\nto = \"b\"\napp = \"reqresp\"\nrequest = \"300B\"\n"), "t.toml").unwrap_err().to_string();
        assert_eq!(e, "flow[0].response: missing for app = \"reqresp\"");
    }
}
