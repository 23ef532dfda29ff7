//! The links view (router level, as ns-2's and the papers' dumbbells): `[[link]]` entries —
//! a duplex link between two nodes (hosts or routers) with rate, one-way delay, queue, loss,
//! reordering and queue discipline — and their checks against the nodes. Routing over them
//! is `topology`'s.

use super::qdisc::{self, FrioSettings, QdiscKind, QdiscSpec, RedSettings, RioSettings};
use super::{ConfigError, Names, PerDirection};
use crate::time::Duration;
use crate::units::{Fraction, QueueLimit, Rate};
use serde::{Deserialize, Serialize};

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
    /// How long a reordered packet is held (default [`DEFAULT_REORDER_DELAY`](super::DEFAULT_REORDER_DELAY)).
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

impl LinkConfig {
    pub fn qdisc_spec(&self) -> QdiscSpec<'_> {
        QdiscSpec { kind: self.qdisc, red: self.red.as_ref(), rio: self.rio.as_ref(), frio: self.frio.as_ref() }
    }
}

/// Checks the `[[link]]` entries: their nodes, rates and queue discipline.
pub(super) fn validate(links: &[LinkConfig], nodes: &Names<'_>) -> Result<(), ConfigError> {
    for (i, l) in links.iter().enumerate() {
        for (j, n) in l.between.iter().enumerate() {
            nodes.require(n, || format!("link[{i}].between[{j}]"))?;
        }
        for d in 0..2 {
            if l.rate.get(d).bps() == 0 {
                return Err(ConfigError::invalid(format!("link[{i}].rate"), "rate must be positive"));
            }
        }
        qdisc::check(l.qdisc_spec(), &format!("link[{i}]"))?;
    }
    Ok(())
}
