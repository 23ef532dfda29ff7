//! `[[marker]]` entries: where a DiffServ marker sits and which policy it runs, and their
//! validation (one-line errors naming the key). The marker element and the policy each entry
//! builds are `marker`'s; `topology` puts the elements on the routes.
//!
//! ```toml
//! [[marker]]
//! at = "h1"                  # every packet leaving host h1 (first hop of its routes), or
//! # between = ["a", "b"]     # the a→b direction of a path or link, before its queue
//! kind = "token-bucket"      # per interval: interval + bucket; continuous: rate + depth
//! interval = "400ms"
//! bucket = "296KB"
//! ```
//! `kind = "srtcm"` takes `cir, cbs, ebs` (RFC 2697); `"trtcm"` takes `cir, cbs, pir, pbs`
//! (RFC 2698); both take `color_aware = true` to meter a packet's existing mark as its
//! precolour (OUT = yellow); `"tcp-friendly"` takes `interval, budget` and optionally `rtt` (default
//! the marker's `DEFAULT_TF_RTT`). Rates are bit rates (`"5.92mbit"`), sizes IP bytes.

use super::{ConfigError, LinkConfig, Names, PathConfig, View};
use crate::time::Duration;
use crate::units::{Rate, Size};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MarkerKind {
    TokenBucket,
    Srtcm,
    Trtcm,
    TcpFriendly,
}

impl MarkerKind {
    fn name(self) -> &'static str {
        match self {
            MarkerKind::TokenBucket => "token-bucket",
            MarkerKind::Srtcm => "srtcm",
            MarkerKind::Trtcm => "trtcm",
            MarkerKind::TcpFriendly => "tcp-friendly",
        }
    }
}

/// One `[[marker]]` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkerConfig {
    /// A host: the marker sees every packet the host sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// A path's or link's direction `[from, to]`: the marker sits before its queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub between: Option<[String; 2]>,
    pub kind: MarkerKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cir: Option<Rate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbs: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pir: Option<Rate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pbs: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<Duration>,
    /// srTCM/trTCM: meter colour-aware, reading the precolour from the packet's mark
    /// (default false: colour-blind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color_aware: Option<bool>,
}

/// Where a validated marker sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement<'a> {
    /// Egress of this host.
    Host(&'a str),
    /// Entrance of the `from → to` direction of a path or link.
    Direction(&'a str, &'a str),
}

impl MarkerConfig {
    pub fn placement(&self) -> Placement<'_> {
        match (&self.at, &self.between) {
            (Some(h), _) => Placement::Host(h),
            (None, Some([a, b])) => Placement::Direction(a, b),
            (None, None) => unreachable!("validated: at or between"),
        }
    }

    /// The element's name in results: `marker[0] h1` or `marker[0] a->b`.
    pub fn element_name(&self, i: usize) -> String {
        match self.placement() {
            Placement::Host(h) => format!("marker[{i}] {h}"),
            Placement::Direction(a, b) => format!("marker[{i}] {a}->{b}"),
        }
    }

    /// Checks entry `i`: where it sits, against the hosts and the view's paths or links, and
    /// the keys its kind takes.
    fn validate(&self, i: usize, hosts: &Names<'_>, view: View, paths: &[PathConfig], links: &[LinkConfig]) -> Result<(), ConfigError> {
        let key = |field: &str| format!("marker[{i}].{field}");
        match (&self.at, &self.between) {
            (Some(_), Some(_)) => return Err(ConfigError::invalid(key("between"), "give either at (a host's egress) or between (a path or link direction), not both")),
            (None, None) => return Err(ConfigError::invalid(format!("marker[{i}]"), "missing at (a host) or between (a path or link direction)")),
            (Some(h), None) => hosts.require(h, || key("at"))?,
            (None, Some([a, b])) => {
                let same = |x: &[String; 2]| (x[0] == *a && x[1] == *b) || (x[0] == *b && x[1] == *a);
                let (found, what) = match view {
                    View::Paths => (paths.iter().any(|p| same(&p.between)), "[[path]]"),
                    View::Links => (links.iter().any(|l| same(&l.between)), "[[link]]"),
                };
                if !found {
                    return Err(ConfigError::invalid(key("between"), format!("no {what} between {a} and {b}")));
                }
            }
        }
        let kind = self.kind.name();
        let fields: [(&str, bool); 12] = [
            ("interval", self.interval.is_some()),
            ("bucket", self.bucket.is_some()),
            ("rate", self.rate.is_some()),
            ("depth", self.depth.is_some()),
            ("cir", self.cir.is_some()),
            ("cbs", self.cbs.is_some()),
            ("ebs", self.ebs.is_some()),
            ("pir", self.pir.is_some()),
            ("pbs", self.pbs.is_some()),
            ("budget", self.budget.is_some()),
            ("rtt", self.rtt.is_some()),
            ("color_aware", self.color_aware.is_some()),
        ];
        let (required, optional): (&[&str], &[&str]) = match self.kind {
            MarkerKind::TokenBucket => match (self.interval.is_some() || self.bucket.is_some(), self.rate.is_some() || self.depth.is_some()) {
                (true, true) => {
                    return Err(ConfigError::invalid(key("rate"), "token-bucket takes interval and bucket (refilled every interval) or rate and depth (continuous), not both"))
                }
                (false, true) => (&["rate", "depth"], &[]),
                _ => (&["interval", "bucket"], &[]),
            },
            MarkerKind::Srtcm => (&["cir", "cbs", "ebs"], &["color_aware"]),
            MarkerKind::Trtcm => (&["cir", "cbs", "pir", "pbs"], &["color_aware"]),
            MarkerKind::TcpFriendly => (&["interval", "budget"], &["rtt"]),
        };
        for (field, present) in fields {
            let used = required.contains(&field) || optional.contains(&field);
            if present && !used {
                return Err(ConfigError::invalid(key(field), format!("not used by kind = \"{kind}\"")));
            }
            if !present && required.contains(&field) {
                return Err(ConfigError::invalid(key(field), format!("missing for kind = \"{kind}\"")));
            }
        }
        let positive = |field: &str, v: u64| if v == 0 { Err(ConfigError::invalid(key(field), "must be positive")) } else { Ok(()) };
        for (field, v) in [
            ("interval", self.interval.map(|d| d.as_nanos())),
            ("bucket", self.bucket.map(|s| s.bytes())),
            ("rate", self.rate.map(|r| r.bps())),
            ("depth", self.depth.map(|s| s.bytes())),
            ("cir", self.cir.map(|r| r.bps())),
            ("pir", self.pir.map(|r| r.bps())),
            // RFC 2698 §3: PBS and CBS must be larger than 0.
            ("pbs", self.pbs.map(|s| s.bytes())),
            ("cbs", self.cbs.map(|s| s.bytes()).filter(|_| self.kind == MarkerKind::Trtcm)),
            ("budget", self.budget.map(|s| s.bytes())),
            ("rtt", self.rtt.map(|d| d.as_nanos())),
        ] {
            if let Some(v) = v {
                positive(field, v)?;
            }
        }
        if self.kind == MarkerKind::Srtcm && self.cbs.zip(self.ebs).is_some_and(|(c, e)| c.bytes() == 0 && e.bytes() == 0) {
            // RFC 2697 §2: at least one of CBS and EBS must be larger than 0.
            return Err(ConfigError::invalid(key("cbs"), "cbs or ebs must be positive"));
        }
        if let (Some(cir), Some(pir)) = (self.cir, self.pir) {
            if pir < cir {
                // RFC 2698 §3: the PIR must be equal to or greater than the CIR.
                return Err(ConfigError::invalid(key("pir"), format!("{pir} is below cir {cir}")));
            }
        }
        Ok(())
    }
}

/// Checks the `[[marker]]` entries against the hosts and the `view`'s paths or links.
pub(super) fn validate(markers: &[MarkerConfig], hosts: &Names<'_>, view: View, paths: &[PathConfig], links: &[LinkConfig]) -> Result<(), ConfigError> {
    for (i, m) in markers.iter().enumerate() {
        m.validate(i, hosts, view, paths, links)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const PATHS: &str = "hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"50ms\"\nabw = \"10mbit\"\n";

    fn parse(marker: &str) -> Result<Config, String> {
        Config::from_toml(&format!("{PATHS}[[marker]]\n{marker}"), "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn the_thesis_token_bucket_parses_with_units() {
        let cfg = parse("at = \"a\"\nkind = \"token-bucket\"\ninterval = \"400ms\"\nbucket = \"296KB\"\n").unwrap();
        let m = &cfg.markers[0];
        assert_eq!(m.interval.unwrap().as_nanos(), 400_000_000);
        assert_eq!(m.bucket.unwrap().bytes(), 296_000);
        let cfg = parse("between = [\"b\", \"a\"]\nkind = \"token-bucket\"\nrate = \"5.92mbit\"\ndepth = \"30KB\"\n").unwrap();
        assert_eq!(cfg.markers[0].rate.unwrap().bps(), 5_920_000);
        assert_eq!(cfg.markers[0].element_name(0), "marker[0] b->a");
    }

    #[test]
    fn every_kind_parses() {
        parse("at = \"a\"\nkind = \"srtcm\"\ncir = \"1mbit\"\ncbs = \"3KB\"\nebs = \"6KB\"\n").unwrap();
        parse("at = \"a\"\nkind = \"trtcm\"\ncir = \"1mbit\"\ncbs = \"3KB\"\npir = \"2mbit\"\npbs = \"6KB\"\ncolor_aware = true\n").unwrap();
        parse("at = \"a\"\nkind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"296KB\"\nrtt = \"80ms\"\n").unwrap();
    }

    #[test]
    fn errors_are_one_line_and_name_the_key() {
        let cases = [
            ("at = \"a\"\nkind = \"srtcm\"\ncir = \"0mbit\"\ncbs = \"3KB\"\nebs = \"6KB\"\n", "marker[0].cir: must be positive"),
            ("at = \"a\"\nkind = \"srtcm\"\ncir = \"1mbit\"\ncbs = \"0B\"\nebs = \"0B\"\n", "marker[0].cbs: cbs or ebs must be positive"),
            ("at = \"a\"\nkind = \"srtcm\"\ncir = \"1mbit\"\ncbs = \"3KB\"\n", "marker[0].ebs: missing for kind = \"srtcm\""),
            ("at = \"a\"\nkind = \"trtcm\"\ncir = \"2mbit\"\ncbs = \"3KB\"\npir = \"1mbit\"\npbs = \"6KB\"\n", "marker[0].pir: 1mbit is below cir 2mbit"),
            ("at = \"a\"\nkind = \"trtcm\"\ncir = \"1mbit\"\ncbs = \"0B\"\npir = \"1mbit\"\npbs = \"6KB\"\n", "marker[0].cbs: must be positive"),
            ("at = \"a\"\nkind = \"token-bucket\"\ninterval = \"400ms\"\nbucket = \"296KB\"\nrate = \"1mbit\"\n", "marker[0].rate: token-bucket takes interval and bucket (refilled every interval) or rate and depth (continuous), not both"),
            ("at = \"a\"\nkind = \"token-bucket\"\ninterval = \"400ms\"\n", "marker[0].bucket: missing for kind = \"token-bucket\""),
            ("at = \"a\"\nkind = \"token-bucket\"\ninterval = \"0ms\"\nbucket = \"1KB\"\n", "marker[0].interval: must be positive"),
            ("at = \"a\"\nkind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"1KB\"\ncir = \"1mbit\"\n", "marker[0].cir: not used by kind = \"tcp-friendly\""),
            ("at = \"c\"\nkind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"1KB\"\n", "marker[0].at: unknown host \"c\""),
            ("between = [\"a\", \"c\"]\nkind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"1KB\"\n", "marker[0].between: no [[path]] between a and c"),
            ("kind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"1KB\"\n", "marker[0]: missing at (a host) or between (a path or link direction)"),
            ("at = \"a\"\nbetween = [\"a\", \"b\"]\nkind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"1KB\"\n", "marker[0].between: give either at (a host's egress) or between (a path or link direction), not both"),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap_err(), want, "{text}");
        }
        let e = parse("at = \"a\"\nkind = \"leaky\"\n").unwrap_err();
        assert!(e.starts_with("t.toml:8: marker[0].kind: unknown variant `leaky`") && !e.contains('\n'), "{e}");
        let e = parse("at = \"a\"\nkind = \"srtcm\"\ncir = \"1mbit\"\ncbs = \"3KB\"\nebs = \"6KB\"\ncolour_aware = true\n").unwrap_err();
        assert!(e.contains("marker[0].colour_aware: unknown field"), "{e}");
        let e = parse("at = \"a\"\nkind = \"token-bucket\"\ninterval = \"1s\"\nbucket = \"1KB\"\ncolor_aware = true\n").unwrap_err();
        assert_eq!(e, "marker[0].color_aware: not used by kind = \"token-bucket\"");
    }
}
