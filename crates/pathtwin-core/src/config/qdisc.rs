//! The queue-discipline keys of a `[[path]]` or `[[link]]`: `qdisc` ([`QdiscKind`]) and its
//! `red`, `rio` and `frio` tables, and their checks. The disciplines' defaults, and the
//! parameters a table resolves to, are the disciplines' own (`qdisc::RedParams::from_settings`
//! and its kin); FRIO's limits are checked as they resolve, so that check reads them from
//! there rather than restating RIO's defaults.

use super::ConfigError;
use crate::qdisc::{FrioParams, RioParams};
use crate::units::{QueueLimit, Size};
use serde::{Deserialize, Serialize};

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

/// `red = { ... }` of a `[[path]]` or `[[link]]` with `qdisc = "red"`. With thresholds (both,
/// in packets, `"5p"`, or bytes, `"30KB"`, in the same unit) the other keys default to Floyd
/// & Jacobson's and ns-2's long-standing values (`qdisc::RedParams::with_thresholds`);
/// without them (or without a `red` table at all) RED configures itself from the link's
/// rate and delay as ns-2.35's `Queue/RED` does with its defaults
/// (`qdisc::RedParams::ns2_automatic`), and any key given overrides that.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_th: Option<QueueLimit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_th: Option<QueueLimit>,
    /// Drop probability at max_th (default 0.1, ns-2's `linterm_` 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_p: Option<f64>,
    /// Weight of the average queue (default 0.002; automatic: from rate and delay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_q: Option<f64>,
    /// Gentle RED between max_th and 2·max_th (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gentle: Option<bool>,
    /// ns-2's `wait_` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
    /// Drop probability scaled by packet size (default false; automatic: true, as ns-2).
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
    /// Never drop while the queue holds at most one packet, as ns-2.35's RED (default false;
    /// automatic: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_queue_exempt: Option<bool>,
}

impl RedSettings {
    /// Checks the values for the entry named `key` (`link[0].red`).
    pub fn validate(&self, key: &str) -> Result<(), ConfigError> {
        match (self.min_th, self.max_th) {
            (Some(min_th), Some(max_th)) => check_thresholds(min_th, max_th, key)?,
            (None, None) => {}
            (Some(_), None) => return Err(ConfigError::invalid(format!("{key}.max_th"), "give both thresholds, or neither for ns-2's automatic ones")),
            (None, Some(_)) => return Err(ConfigError::invalid(format!("{key}.min_th"), "give both thresholds, or neither for ns-2's automatic ones")),
        }
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

/// The largest `mean_packet`: the largest IP packet. The disciplines keep it as a `u32` and
/// divide by it (FRIO's default max_q), so a larger one must not reach them.
const MAX_MEAN_PACKET: u64 = 65_535;

fn check_mean_packet(m: Option<Size>, key: &str) -> Result<(), ConfigError> {
    match m.map(Size::bytes) {
        Some(0) => Err(ConfigError::invalid(format!("{key}.mean_packet"), "must be positive")),
        Some(b) if b > MAX_MEAN_PACKET => Err(ConfigError::invalid(format!("{key}.mean_packet"), format!("{b} B is above {MAX_MEAN_PACKET} B, the largest IP packet"))),
        _ => Ok(()),
    }
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

/// Checks that an entry's `red`, `rio` and `frio` tables and its `qdisc` go together, and
/// their values, for the entry named `key` (`path[0]`).
pub(super) fn check(q: QdiscSpec<'_>, key: &str) -> Result<(), ConfigError> {
    match (q.kind, q.red) {
        (QdiscKind::Red, Some(r)) => r.validate(&format!("{key}.red"))?,
        (QdiscKind::Red, None) => {}
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
