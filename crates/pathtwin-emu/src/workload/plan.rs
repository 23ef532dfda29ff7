//! What the emulator's workload will run, decided from the config before any host exists:
//! one [`ConnPlan`] per connection (each copy of each `[[flow]]` entry, numbered as the
//! simulator numbers them), one [`EntryPlan`] per entry (its server's listening port and
//! the socket options both of its ends take), and the checks of what the kernel can do for
//! one connection. Pure: no socket, no clock, no namespace.
//!
//! # Per-connection TCP settings
//! A flow's `cc` and `tcp` table apply to both ends of its connections, as in the simulator,
//! where the kernel has a per-socket equivalent: `cc` is `TCP_CONGESTION`; `mss` is
//! `TCP_MAXSEG` (set before the handshake, so both SYNs announce it); `rcv_window` and
//! `max_window` are the window clamp (`TCP_WINDOW_CLAMP`, the advertised window's ceiling,
//! what the route attribute `window` sets for `[tcp]`) and the buffers (`SO_RCVBUF`,
//! `SO_SNDBUF`, which the kernel doubles for its overhead, as the `[tcp]` sysctls take twice
//! the window); `delayed_ack = false` re-arms `TCP_QUICKACK` after every read (Linux clears
//! it; the replay agent does the same). The listener carries the server end's options, and
//! each accepted socket inherits them. What the kernel sets only per route or per namespace
//! (`initial_window`, `min_rto`, `sack`, `ecn`) belongs in `[tcp]`, and what only the
//! simulator's TCP has (RACK and TLP switches, duplicate-ACK threshold, NewReno's timer
//! variant, the delayed-ACK timeout, controller tables, `profile = "ns2"`) cannot be run at
//! all: either is a one-line error naming the key, never a silently different run.
//! `profile = "linux"` is what the kernel is, and changes nothing.

use std::net::Ipv4Addr;

use pathtwin_core::config::{connection_labels, Config, ConfigError, FlowConfig, TcpProfile, TcpSettings};
use pathtwin_core::time::Instant;
use pathtwin_core::topology::Network;

/// The port of entry 0's listener; entry `e` listens on `BASE_PORT + e` in its server host.
/// Below Linux's default ephemeral range (32768–60999), so no client's own port collides.
pub const BASE_PORT: u16 = 20_000;
/// Most `[[flow]]` entries one run's workload can have (ports up to 32767).
pub const MAX_ENTRIES: usize = 12_768;

/// Socket options of one entry's connections, both ends (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SocketOptions {
    /// Kernel congestion control (`TCP_CONGESTION`); `None`: the host's default.
    pub cc: Option<String>,
    pub mss: Option<u32>,
    pub window_clamp: Option<u32>,
    pub rcvbuf: Option<u32>,
    pub sndbuf: Option<u32>,
    /// Re-arm `TCP_QUICKACK` after every read.
    pub quickack: bool,
}

/// One `[[flow]]` entry: where its connections are accepted, and how their sockets are set.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryPlan {
    pub flow: FlowConfig,
    /// Client and server host indices (config order).
    pub client: usize,
    pub server: usize,
    pub port: u16,
    pub options: SocketOptions,
    /// With `pipe = N`: the slot of pipe N among its client host's pipes, whose address the
    /// client binds.
    pub pipe_slot: Option<u32>,
}

/// One connection: copy `copy` of entry `entry`, flow number its index in [`Plan::conns`].
#[derive(Clone, Debug, PartialEq)]
pub struct ConnPlan {
    pub entry: usize,
    pub copy: u32,
    pub label: String,
    pub start: Instant,
    pub stop: Option<Instant>,
}

/// The whole workload of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub entries: Vec<EntryPlan>,
    pub conns: Vec<ConnPlan>,
    /// `[run] duration` from model time zero, and `[run] until_done`.
    pub end: Instant,
    pub until_done: bool,
    pub sample_interval: pathtwin_core::time::Duration,
    pub hosts: Vec<String>,
}

/// Linux has no separate NewReno: its `reno` is NewReno (RFC 6582), as `[tcp] cc` maps it.
pub fn kernel_cc_name(cc: &str) -> &str {
    if cc == "newreno" {
        "reno"
    } else {
        cc
    }
}

/// Plans `cfg`'s `[[flow]]` workload over `net` (the compiled topology, for its routes and
/// pipes); `available_cc` is the kernel's list of congestion controls.
pub fn plan<P>(cfg: &Config, net: &Network<P>, available_cc: &[String]) -> Result<Plan, ConfigError> {
    if cfg.flows.is_empty() {
        return Err(ConfigError::invalid("flow", "the config has no [[flow]] entries: there is no workload to run"));
    }
    if cfg.flows.len() > MAX_ENTRIES {
        return Err(ConfigError::invalid(
            "flow",
            format!("{} [[flow]] entries; the emulator's workload takes at most {MAX_ENTRIES} (one server port each; use count for copies)", cfg.flows.len()),
        ));
    }
    let mut entries = Vec::with_capacity(cfg.flows.len());
    let mut conns = Vec::new();
    let labels = connection_labels(&cfg.flows);
    for (i, f) in cfg.flows.iter().enumerate() {
        let (client, server) = (net.host_id(&f.from).expect("validated host"), net.host_id(&f.to).expect("validated host"));
        let pipe_slot = match f.pipe {
            // Validation checked that the pipe exists and that its ends are the flow's hosts.
            Some(p) => Some(net.pipes[p as usize].slot),
            None => {
                if net.route(client, server).is_none() || net.route(server, client).is_none() {
                    return Err(ConfigError::invalid(format!("flow[{i}]"), format!("no route between {} and {}", f.from, f.to)));
                }
                None
            }
        };
        let options = socket_options(i, f, &cfg.tcp, available_cc)?;
        entries.push(EntryPlan { flow: f.clone(), client, server, port: BASE_PORT + i as u16, options, pipe_slot });
        for copy in 0..f.count {
            conns.push(ConnPlan {
                entry: i,
                copy,
                label: labels[i][copy as usize].clone(),
                start: Instant::ZERO + f.start,
                stop: f.stop.map(|s| Instant::ZERO + s),
            });
        }
    }
    Ok(Plan {
        entries,
        conns,
        end: Instant::ZERO + cfg.run.duration,
        until_done: cfg.run.until_done,
        sample_interval: cfg.run.sample_interval,
        hosts: cfg.hosts.clone(),
    })
}

/// Entry `i`'s socket options from its `cc` and `tcp` (see the module doc); `global` is
/// `[tcp]`, which the hosts' kernels already carry and which a flow's window settings
/// combine with.
fn socket_options(i: usize, f: &FlowConfig, global: &TcpSettings, available_cc: &[String]) -> Result<SocketOptions, ConfigError> {
    let t = &f.tcp;
    let refuse = |key: &str, why: &str| Err(ConfigError::invalid(format!("flow[{i}].tcp.{key}"), why.to_string()));
    if let Some((name, _)) = t.controller_tables().iter().find(|(_, set)| *set) {
        return refuse(name, "the emulator runs the kernel's congestion control and cannot set its parameters (they are the simulator's); remove the table or use `pathtwin sim`");
    }
    if t.profile == Some(TcpProfile::Ns2) {
        return refuse("profile", crate::emulator::NS2_PROFILE_IN_EMULATOR);
    }
    let per_host = "the kernel sets it per route or per host, not per connection; set it in [tcp] for every connection of the emulation";
    for (key, set) in [
        ("initial_window", t.initial_window.is_some()),
        ("min_rto", t.min_rto.is_some()),
        ("sack", t.sack.is_some()),
        ("ecn", t.ecn.is_some()),
        ("rack", t.rack.is_some()),
        ("tlp", t.tlp.is_some()),
        ("dupack_threshold", t.dupack_threshold.is_some()),
        ("slow_start_after_idle", t.slow_start_after_idle.is_some()),
    ] {
        if set {
            return refuse(key, per_host);
        }
    }
    if let Some(key) = t.simulator_only_setting() {
        return refuse(key, crate::emulator::SIMULATOR_ONLY_SETTING);
    }
    let cc = match (&f.cc, &t.cc) {
        (Some(cc), _) => Some((format!("flow[{i}].cc"), cc)),
        (None, Some(cc)) => Some((format!("flow[{i}].tcp.cc"), cc)),
        (None, None) => None,
    };
    let cc = match cc {
        Some((key, cc)) => {
            let name = kernel_cc_name(cc);
            if !available_cc.is_empty() && !available_cc.iter().any(|a| a == name) {
                return Err(ConfigError::invalid(key, format!("the kernel has no congestion control {cc:?} (available: {})", available_cc.join(" "))));
            }
            Some(name.to_string())
        }
        None => None,
    };
    if let Some(mss) = t.mss {
        // The kernel refuses TCP_MAXSEG outside TCP_MIN_MSS (88) ..= MAX_TCP_WINDOW.
        if !(88..=65_535).contains(&mss) {
            return refuse("mss", &format!("{mss} is outside the 88..65535 bytes the kernel takes"));
        }
    }
    let bytes = |w: Option<pathtwin_core::units::Size>, key: &str| -> Result<Option<u32>, ConfigError> {
        match w.map(|w| w.bytes()) {
            // The kernel's buffers are ints, doubled for overhead: at most i32::MAX / 2.
            Some(b) if b > (i32::MAX / 2) as u64 => Err(ConfigError::invalid(format!("flow[{i}].tcp.{key}"), format!("{b} bytes is more than a socket buffer can hold"))),
            Some(b) => Ok(Some(b as u32)),
            None => Ok(None),
        }
    };
    let (rcv, snd) = (bytes(t.rcv_window, "rcv_window")?, bytes(t.max_window, "max_window")?);
    // The window either end advertises: the flow's own settings with [tcp]'s, smallest wins
    // (as the hosts' route attribute `window` does for [tcp] alone). Only a flow that sets
    // one needs a clamp of its own; the rest already have the route's.
    let window_clamp = if rcv.is_some() || snd.is_some() {
        [t.rcv_window.or(global.rcv_window), t.max_window.or(global.max_window)].into_iter().flatten().map(|w| w.bytes().min((i32::MAX / 2) as u64) as u32).min()
    } else {
        None
    };
    Ok(SocketOptions { cc, mss: t.mss, window_clamp, rcvbuf: rcv, sndbuf: snd, quickack: t.delayed_ack == Some(false) })
}

/// The address a pipe flow's client binds: slot `slot` of its host's pipe range starting at
/// `first` (see `crate::lab::HostInfo::pipe_address`).
pub fn pipe_bind(first: Option<Ipv4Addr>, slot: u32) -> Option<Ipv4Addr> {
    first.map(|a| Ipv4Addr::from(u32::from(a) + slot))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathtwin_core::topology;

    fn planned(flows: &str) -> Result<Plan, ConfigError> {
        let text = format!("hosts = [\"a\", \"b\", \"c\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"10ms\"\nabw = \"10mbit\"\n{flows}");
        let cfg = Config::from_toml(&text, "t.toml")?;
        let net = topology::compile::<crate::engine::EmuPacket>(&cfg)?;
        plan(&cfg, &net, &["reno".to_string(), "cubic".to_string(), "bbr".to_string()])
    }

    #[test]
    fn copies_are_numbered_and_labelled_as_the_simulator_does() {
        let p = planned("[[flow]]\nfrom = \"a\"\nto = \"b\"\ncount = 3\n[[flow]]\nfrom = \"b\"\nto = \"a\"\nlabel = \"web\"\nstart = \"1s\"\nstop = \"2s\"\n").unwrap();
        let labels: Vec<&str> = p.conns.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["a->b#0", "a->b#1", "a->b#2", "web"]);
        assert_eq!(p.conns.iter().map(|c| (c.entry, c.copy)).collect::<Vec<_>>(), [(0, 0), (0, 1), (0, 2), (1, 0)]);
        assert_eq!((p.entries[0].port, p.entries[1].port), (BASE_PORT, BASE_PORT + 1));
        assert_eq!((p.entries[1].client, p.entries[1].server), (1, 0));
        assert_eq!(p.conns[3].stop, Some(Instant::ZERO + pathtwin_core::time::Duration::from_secs(2)));
    }

    #[test]
    fn per_connection_settings_become_socket_options() {
        let p = planned("[tcp]\nmax_window = \"64KB\"\n[[flow]]\nfrom = \"a\"\nto = \"b\"\ncc = \"newreno\"\n[flow.tcp]\nmss = 536\nrcv_window = \"16KB\"\ndelayed_ack = false\n[[flow]]\nfrom = \"a\"\nto = \"b\"\n").unwrap();
        let o = &p.entries[0].options;
        assert_eq!(o.cc.as_deref(), Some("reno"));
        assert_eq!((o.mss, o.rcvbuf, o.sndbuf, o.window_clamp, o.quickack), (Some(536), Some(16_000), None, Some(16_000), true));
        // Nothing set per flow: the hosts' own settings apply.
        assert_eq!(p.entries[1].options, SocketOptions::default());
    }

    #[test]
    fn what_the_kernel_cannot_do_per_connection_is_a_one_line_error_naming_the_key() {
        let err = |flow: &str| planned(&format!("[[flow]]\nfrom = \"a\"\nto = \"b\"\n{flow}")).unwrap_err().to_string();
        assert_eq!(err("cc = \"vegas\""), "flow[0].cc: the kernel has no congestion control \"vegas\" (available: reno cubic bbr)");
        assert!(err("[flow.tcp]\ninitial_window = 4").starts_with("flow[0].tcp.initial_window: the kernel sets it per route"));
        assert!(err("[flow.tcp]\nrack = false").starts_with("flow[0].tcp.rack: the kernel sets it per route or per host"));
        assert!(err("[flow.tcp]\nlost_retransmit = true").starts_with("flow[0].tcp.lost_retransmit: a setting of the simulator's TCP"));
        assert!(err("[flow.tcp]\nprofile = \"ns2\"").starts_with("flow[0].tcp.profile: \"ns2\" is the simulator's own TCP"));
        // The kernel is Linux: `profile = "linux"` is accepted and changes nothing.
        let linux = planned("[[flow]]\nfrom = \"a\"\nto = \"b\"\n[flow.tcp]\nprofile = \"linux\"\n").unwrap();
        assert_eq!(linux.entries[0].options, SocketOptions::default());
        assert!(err("[flow.tcp.cubic]\nbeta = 0.5").starts_with("flow[0].tcp.cubic: the emulator runs the kernel's congestion control"));
        assert_eq!(err("[flow.tcp]\nmss = 40"), "flow[0].tcp.mss: 40 is outside the 88..65535 bytes the kernel takes");
        assert_eq!(planned("[[flow]]\nfrom = \"a\"\nto = \"c\"\n").unwrap_err().to_string(), "flow[0]: no route between a and c");
        assert_eq!(planned("").unwrap_err().to_string(), "flow: the config has no [[flow]] entries: there is no workload to run");
        for e in [err("cc = \"vegas\""), err("[flow.tcp]\nsack = false")] {
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
