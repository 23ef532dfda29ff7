//! `[monarch]`: Monarch's proxy (emulator only) — which hosts are its sender, receiver and
//! target, and what it probes the target with — and its checks. The proxy itself is
//! `pathtwin_emu::monarch`.

use super::{ConfigError, Names};
use serde::{Deserialize, Serialize};

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

/// Checks `[monarch]`: three different, existing hosts.
pub(super) fn validate(m: &MonarchConfig, hosts: &Names<'_>) -> Result<(), ConfigError> {
    for (key, h) in [("sender", &m.sender), ("receiver", &m.receiver), ("target", &m.target)] {
        hosts.require(h, || format!("monarch.{key}"))?;
    }
    if m.sender == m.receiver || m.sender == m.target || m.receiver == m.target {
        return Err(ConfigError::invalid("monarch", "sender, receiver and target must be three different hosts"));
    }
    Ok(())
}
