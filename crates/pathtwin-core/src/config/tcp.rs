//! TCP settings: `[tcp]` and a flow's `tcp` ([`TcpSettings`], every field optional so that a
//! flow overrides the defaults section), and the per-controller tables `[tcp.vegas]`,
//! `[tcp.cubic]`, `[tcp.bic]`, `[tcp.monaco]`. This is the schema only: which names `cc`
//! takes, the defaults, and the ranges are the engine's (the simulator's endpoint,
//! `pathtwin_tcp`, beside each controller; the emulator's kernel).
//!
//! The choices a setting names ([`TcpProfile`], [`RoundRtt`], [`VegasRules`], [`NewRenoTimer`])
//! are declared here once, and the endpoint uses these very types in its parameters: there is no second
//! copy to keep in step with the schema.

use crate::time::Duration;
use crate::units::Size;
use serde::{de, Deserialize, Deserializer, Serialize};

/// A controller's constant: any finite number (its range is the engine's to check). TOML
/// spells `nan` and `inf`, which a range check written `x <= 0.0` lets through, which JSON
/// cannot write (a config would not survive `validate_config`'s round trip), and a NaN is
/// not even equal to itself.
fn finite<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    match Option::<f64>::deserialize(d)? {
        Some(v) if !v.is_finite() => Err(de::Error::custom(format!("{v} is not a finite number"))),
        v => Ok(v),
    }
}

/// Which TCP the simulator's endpoints stand for: the defaults of every setting a config
/// leaves unset (`[tcp] profile`, or a flow's `tcp.profile`). The values and the source of
/// each are in `docs/tcp-defaults.md`; `pathtwin_tcp`'s `TcpConfig::from_settings` applies them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TcpProfile {
    /// The simulator's TCP as the ns-2 comparisons, `bench/tcp` and the papers'
    /// reproductions run it (RFC 5681/6298/6675 with RACK-TLP, 1460-byte segments, slow start
    /// of at most one segment per ACK, CUBIC of RFC 9438 with HyStart++). The default of
    /// `pathtwin sim`.
    #[default]
    Ns2,
    /// Linux 6.x's TCP, as the emulator's kernel runs it: timestamps (1448-byte segments),
    /// the kernel's RTO and quick-ACK rules, PRR, slow start by every segment acknowledged,
    /// and the kernel's CUBIC (HyStart). For runs that stand in for the kernel (a replay in
    /// the simulator, a comparison with an emulation of the same file).
    Linux,
}

impl TcpProfile {
    /// The name a config writes.
    pub fn name(self) -> &'static str {
        match self {
            TcpProfile::Ns2 => "ns2",
            TcpProfile::Linux => "linux",
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
    #[serde(default, deserialize_with = "finite", skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    #[serde(default, deserialize_with = "finite", skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    #[serde(default, deserialize_with = "finite", skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    /// Vegas-k: the base RTT is the minimum of the last k RTT samples instead of all of them
    /// (ACC paper §III-A).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_rtt_window: Option<u32>,
    /// Which RTT of a round congestion avoidance reads: `"mean"` (ns-2; the `ns2` preset's)
    /// or `"min"` (Linux; the `linux` preset's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_rtt: Option<RoundRtt>,
    /// Whose reading of the paper fills in rounds, rounding and growth: `"linux"` (the
    /// default, for both presets) or `"ns2"` (ns-2's `tcp-vegas.cc`: whole-segment diff,
    /// growth spread over the next round, slow start left with an eighth off). ns-2's rules
    /// assume an ACK per segment, as ns-2's TCPSink sends: use them with `delayed_ack = false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<VegasRules>,
}

/// Which of a round's RTT samples Vegas's congestion avoidance reads (see `pathtwin_tcp`'s
/// Vegas).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoundRtt {
    /// The mean of the round's samples (ns-2, Brakmo & Peterson).
    Mean,
    /// The smallest of the round's samples (Linux).
    Min,
}

/// The rule set for what the Vegas paper leaves open (see `pathtwin_tcp`'s Vegas).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VegasRules {
    /// ns-2's `tcp-vegas.cc`. Its per-ACK growth and its count of segments in flight assume
    /// an ACK per segment (ns-2's TCPSink): with delayed ACKs a single flow on a 10 Mbit/s,
    /// 50 ms path kept no standing queue (per-round minimum 0.0 packets, mean 0.96).
    Ns2,
    /// Linux's `tcp_vegas.c`.
    Linux,
}

/// Which constants `[tcp.vegas]` starts from (see [`VegasSettings::preset`]).
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
    /// without HyStart; `"ns2"`: `"linux-2.6"` as ns-2.35's port runs it (no look-ahead);
    /// `"linux"`: Linux 6.x's `tcp_cubic.c` (β = 717/1024, HyStart's ACK train and delay
    /// detectors). Without a preset: `"linux"` under `profile = "linux"`, else `"rfc9438"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<CubicPreset>,
    /// C, in segments per second cubed.
    #[serde(default, deserialize_with = "finite", skip_serializing_if = "Option::is_none")]
    pub c: Option<f64>,
    /// Multiplicative decrease factor β (the window after a loss is β·cwnd).
    #[serde(default, deserialize_with = "finite", skip_serializing_if = "Option::is_none")]
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

/// Which constants `[tcp.cubic]` starts from (see [`CubicSettings::preset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CubicPreset {
    #[serde(rename = "rfc9438")]
    Rfc9438,
    #[serde(rename = "linux-2.6")]
    Linux26,
    #[serde(rename = "ns2")]
    Ns2,
    #[serde(rename = "linux")]
    Linux,
}

/// `[tcp.bic]`: BIC's constants; unset fields keep Linux 2.6's `tcp_bic.c` values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BicSettings {
    /// Multiplicative decrease factor (Linux: 819/1024).
    #[serde(default, deserialize_with = "finite", skip_serializing_if = "Option::is_none")]
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
    #[serde(default, deserialize_with = "finite", skip_serializing_if = "Option::is_none")]
    pub k: Option<f64>,
    /// Target accumulation a* in segments.
    #[serde(default, deserialize_with = "finite", skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// Start in slow start until the accumulation reaches the target (default false, as the
    /// paper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_start: Option<bool>,
}

/// When NewReno's fast recovery (no SACK) restarts the retransmission timer, written
/// `"impatient"` or `"slow-but-steady"`; RFC 6582 names the two variants (the timer
/// discussion that §3.2 step 5 refers to, first in RFC 2582 and RFC 3782 §4).
///
/// With many losses in one window, recovery repairs one hole per round trip. Impatient lets
/// the timer run out after about one RTO, so the window is repaired by a timeout and slow
/// start (go-back-N) instead; Slow-but-Steady keeps repairing one hole per RTT for as many
/// round trips as there are holes, while the inflated window lets new data follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NewRenoTimer {
    /// Restart the timer on the first partial ACK of an episode only (RFC 6582 §3.2 step
    /// 5; ns-2 `newreno_changes1_ 1`, its default since 2003).
    #[default]
    Impatient,
    /// Restart it on every partial ACK, as RFC 6298 (5.3) does for any ACK of new data
    /// (the variant of Fall & Floyd's 1996 simulations; ns-2 `newreno_changes1_ 0`; Linux).
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
    /// Which TCP the unset settings default to: `"ns2"` (the default) or `"linux"`
    /// ([`TcpProfile`]). The emulator's kernel is Linux: it takes `"linux"` and refuses
    /// `"ns2"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<TcpProfile>,
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
    pub newreno_timer: Option<NewRenoTimer>,
    /// Ask for ECN (RFC 3168) in the SYN; default off. Either way a server accepts ECN when
    /// asked, as Linux's default `net.ipv4.tcp_ecn = 2`. RED with `ecn = true` then marks
    /// instead of dropping early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
    /// Restart the congestion window after the connection was idle for longer than the RTO
    /// (RFC 2861, RFC 5681 §4.1), as Linux's `net.ipv4.tcp_slow_start_after_idle = 1`;
    /// default off under `profile = "ns2"`, on under `"linux"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_start_after_idle: Option<bool>,
}

impl TcpSettings {
    /// Each per-controller table by name, and whether this section sets it.
    pub fn controller_tables(&self) -> [(&'static str, bool); 4] {
        [("vegas", self.vegas.is_some()), ("cubic", self.cubic.is_some()), ("bic", self.bic.is_some()), ("monaco", self.monaco.is_some())]
    }

    /// The first of the simulator's own mechanisms this section sets, by key: those Linux
    /// has no switch for (the emulator refuses them).
    pub fn simulator_only_setting(&self) -> Option<&'static str> {
        [
            ("delayed_ack_timeout", self.delayed_ack_timeout.is_some()),
            ("lost_retransmit", self.lost_retransmit.is_some()),
            ("ns2_rto_restart_every_ack", self.ns2_rto_restart_every_ack.is_some()),
            ("newreno_timer", self.newreno_timer.is_some()),
        ]
        .into_iter()
        .find_map(|(key, set)| set.then_some(key))
    }

    /// `self` with every field that `over` sets replaced.
    pub fn overridden_by(&self, over: &TcpSettings) -> TcpSettings {
        TcpSettings {
            profile: over.profile.or(self.profile),
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
            slow_start_after_idle: over.slow_start_after_idle.or(self.slow_start_after_idle),
        }
    }
}
