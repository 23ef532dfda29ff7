//! Maps the config's TCP settings (`[tcp]`, a flow's `tcp`, the per-controller tables
//! `[tcp.vegas]`, `[tcp.cubic]`, `[tcp.bic]`, `[tcp.monaco]`) onto the endpoint's [`TcpConfig`].
//!
//! This module owns the simulator's reading of `cc`: a name the simulator cannot run, or a
//! parameter that makes no sense, is an error naming the key and, for a name, listing the
//! names the simulator has. It does not own the defaults (those are `TcpConfig`'s and the
//! controllers' own, each with its source) nor the schema (`pathtwin_core::config`).

use pathtwin_core::config::{
    BicSettings, ConfigError, CubicPreset, CubicSettings, MonacoSettings, NewRenoTimerName, RoundRttName, TcpSettings, VegasPreset, VegasRulesName,
    VegasSettings,
};
use pathtwin_tcp::{BicParams, CcAlgorithm, ConfigError as TcpConfigError, CubicParams, MonacoParams, NewRenoTimer, RoundRtt, TcpConfig, VegasParams, VegasRules};

/// The endpoint config for merged settings whose `cc` was written under `cc_key` (`"tcp"`,
/// `"flow[3].tcp"`, or `"flow[3]"` for the flow's `cc` shortcut). Check each section's
/// controller tables with [`check_tables`] first, so that their errors name the section.
pub fn tcp_config(s: &TcpSettings, cc_key: &str) -> Result<TcpConfig, ConfigError> {
    let mut c = TcpConfig::default();
    if let Some(v) = s.mss {
        c.mss = v;
    }
    if let Some(v) = s.sack {
        c.sack = v;
    }
    if let Some(v) = s.delayed_ack {
        c.delayed_ack = v;
    }
    if let Some(v) = s.delayed_ack_timeout {
        c.delayed_ack_timeout = v;
    }
    if let Some(v) = s.min_rto {
        c.min_rto = v;
    }
    if let Some(v) = s.initial_window {
        c.initial_window = v;
    }
    if let Some(v) = s.max_window {
        c.max_window = v.bytes();
    }
    if let Some(v) = s.rcv_window {
        c.rcv_buffer = v.bytes();
    }
    if let Some(v) = s.rack {
        c.rack = v;
    }
    if let Some(v) = s.tlp {
        c.tlp = v;
    }
    if let Some(v) = s.lost_retransmit {
        c.lost_retransmit = v;
    }
    if let Some(v) = s.ns2_rto_restart_every_ack {
        c.ns2_rto_restart_every_ack = v;
    }
    if let Some(v) = s.dupack_threshold {
        c.dupack_threshold = v;
    }
    if let Some(v) = s.ecn {
        c.ecn = v;
    }
    if let Some(v) = s.newreno_timer {
        c.newreno_timer = match v {
            NewRenoTimerName::Impatient => NewRenoTimer::Impatient,
            NewRenoTimerName::SlowButSteady => NewRenoTimer::SlowButSteady,
        };
    }
    if let Some(name) = &s.cc {
        c.cc = cc_algorithm(name, s, cc_key)?;
    }
    Ok(c)
}

/// The controller called `name`, with its table's parameters.
fn cc_algorithm(name: &str, s: &TcpSettings, key: &str) -> Result<CcAlgorithm, ConfigError> {
    Ok(match name {
        "reno" => CcAlgorithm::Reno,
        "newreno" => CcAlgorithm::NewReno,
        "vegas" => CcAlgorithm::Vegas(vegas_params(s.vegas.as_ref(), key)?),
        "cubic" => CcAlgorithm::Cubic(cubic_params(s.cubic.as_ref(), key)?),
        "bic" => CcAlgorithm::Bic(bic_params(s.bic.as_ref(), key)?),
        "bbr" => CcAlgorithm::Bbr,
        "monaco" => CcAlgorithm::Monaco(monaco_params(s.monaco.as_ref(), key)?),
        _ => {
            return Err(ConfigError::invalid(
                format!("{key}.cc"),
                format!("the simulator has no congestion control {name:?} (it has: {})", CcAlgorithm::simulator_names().join(", ")),
            ))
        }
    })
}

fn vegas_params(v: Option<&VegasSettings>, key: &str) -> Result<VegasParams, ConfigError> {
    let Some(v) = v else { return Ok(VegasParams::NS2) };
    let mut p = match v.preset {
        None | Some(VegasPreset::Ns2) => VegasParams::NS2,
        Some(VegasPreset::Linux) => VegasParams::LINUX,
    };
    p.alpha = v.alpha.unwrap_or(p.alpha);
    p.beta = v.beta.unwrap_or(p.beta);
    p.gamma = v.gamma.unwrap_or(p.gamma);
    p.base_rtt_window = v.base_rtt_window.or(p.base_rtt_window);
    if let Some(r) = v.round_rtt {
        p.round_rtt = match r {
            RoundRttName::Mean => RoundRtt::Mean,
            RoundRttName::Min => RoundRtt::Min,
        };
    }
    if let Some(r) = v.rules {
        p.rules = match r {
            VegasRulesName::Ns2 => VegasRules::Ns2,
            VegasRulesName::Linux => VegasRules::Linux,
        };
    }
    checked(CcAlgorithm::Vegas(p), key).map(|_| p)
}

fn cubic_params(v: Option<&CubicSettings>, key: &str) -> Result<CubicParams, ConfigError> {
    let Some(v) = v else { return Ok(CubicParams::RFC9438) };
    let mut p = match v.preset {
        None | Some(CubicPreset::Rfc9438) => CubicParams::RFC9438,
        Some(CubicPreset::Linux26) => CubicParams::LINUX_2_6,
        Some(CubicPreset::Ns2) => CubicParams::NS2,
    };
    p.c = v.c.unwrap_or(p.c);
    p.beta = v.beta.unwrap_or(p.beta);
    p.fast_convergence = v.fast_convergence.unwrap_or(p.fast_convergence);
    p.reno_friendly = v.reno_friendly.unwrap_or(p.reno_friendly);
    p.hystart = v.hystart.unwrap_or(p.hystart);
    p.rtt_lookahead = v.rtt_lookahead.unwrap_or(p.rtt_lookahead);
    checked(CcAlgorithm::Cubic(p), key).map(|_| p)
}

fn bic_params(v: Option<&BicSettings>, key: &str) -> Result<BicParams, ConfigError> {
    let mut p = BicParams::default();
    let Some(v) = v else { return Ok(p) };
    p.beta = v.beta.unwrap_or(p.beta);
    p.low_window = v.low_window.unwrap_or(p.low_window);
    p.max_increment = v.max_increment.unwrap_or(p.max_increment);
    p.smooth_part = v.smooth_part.unwrap_or(p.smooth_part);
    p.b = v.b.unwrap_or(p.b);
    p.fast_convergence = v.fast_convergence.unwrap_or(p.fast_convergence);
    checked(CcAlgorithm::Bic(p), key).map(|_| p)
}

fn monaco_params(v: Option<&MonacoSettings>, key: &str) -> Result<MonacoParams, ConfigError> {
    let mut p = MonacoParams::PAPER;
    let Some(v) = v else { return Ok(p) };
    p.k = v.k.unwrap_or(p.k);
    p.target = v.target.unwrap_or(p.target);
    p.slow_start = v.slow_start.unwrap_or(p.slow_start);
    checked(CcAlgorithm::Monaco(p), key).map(|_| p)
}

/// The controller's own range checks (`CcAlgorithm::validate`), with the error's key moved
/// from `tcp.` to the section the table was written in.
fn checked(cc: CcAlgorithm, key: &str) -> Result<CcAlgorithm, ConfigError> {
    cc.validate().map(|_| cc).map_err(|e| match e {
        TcpConfigError::CcParam { key: field, value, why } => {
            ConfigError::invalid(format!("{key}{}", field.trim_start_matches("tcp")), format!("{value} {why}"))
        }
        other => ConfigError::invalid(key, other.to_string()),
    })
}

/// Checks the controller tables written in one section (`[tcp]` or a flow's `tcp`, named by
/// `key`), so that a bad parameter is reported where it was written.
pub fn check_tables(s: &TcpSettings, key: &str) -> Result<(), ConfigError> {
    if let Some(v) = &s.vegas {
        vegas_params(Some(v), key)?;
    }
    if let Some(v) = &s.cubic {
        cubic_params(Some(v), key)?;
    }
    if let Some(v) = &s.bic {
        bic_params(Some(v), key)?;
    }
    if let Some(v) = &s.monaco {
        monaco_params(Some(v), key)?;
    }
    Ok(())
}

/// The name of the `[tcp.*]` table that parameterises `cc` (Vegas-k's is `vegas`).
pub fn table_name(cc: &CcAlgorithm) -> &'static str {
    match cc {
        CcAlgorithm::Vegas(_) => "vegas",
        other => other.name(),
    }
}

/// Per-controller tables that no flow uses are a mistake (a typo in `cc`, or a table left
/// from another experiment): the simulator would silently ignore them.
pub fn check_tables_used(tables: &TcpSettings, used: &[&str], key: &str) -> Result<(), ConfigError> {
    for (name, present) in tables.controller_tables() {
        if present && !used.contains(&name) {
            return Err(ConfigError::invalid(format!("{key}.{name}"), format!("no flow runs cc = {name:?}, so these parameters would be ignored")));
        }
    }
    Ok(())
}
