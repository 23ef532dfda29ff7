//! `[monarch]`: Monarch's proxy (emulator only) — which hosts are its sender and receiver,
//! which target it probes (a host of the emulation, or a real address reached through the
//! machine's own network stack) and with what — and its checks. The proxy itself is
//! `pathtwin_emu::monarch`; the way to a real target is `pathtwin_emu::real_target`.

use std::net::Ipv4Addr;

use super::{ConfigError, Names};
use crate::units::Rate;
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
/// `receiver` are carried as probes to `target` and its answers; `receiver`'s packets go
/// straight back to `sender` unless a path or link between them says otherwise (emulator
/// only). `target` is a host of the config (the probes cross the route between `sender` and
/// it) or an IPv4 address outside the emulation (the probes leave through the machine's own
/// routing, as Monarch's did).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonarchConfig {
    pub sender: String,
    pub receiver: String,
    pub target: String,
    /// A real target whose address is not globally reachable (private, shared, loopback,
    /// link-local, documentation, benchmarking) or multicast is refused unless this is set:
    /// probing such an address reaches one's own or a neighbour's network, which must be
    /// meant.
    #[serde(default)]
    pub allow_private: bool,
    /// The most a real target is sent, in probe bytes per second (default
    /// [`DEFAULT_MAX_RATE`]): the proxy drops what would exceed it, so that a transfer can
    /// never flood a host that did not agree to be measured. Emulated targets have no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<Rate>,
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

/// The default cap on what a real target is sent ([`MonarchConfig::max_rate`]): a home
/// broadband downlink's worth, Monarch's own use (its targets were broadband hosts).
pub const DEFAULT_MAX_RATE: Rate = Rate::from_mbps(20);

/// Where a [`MonarchConfig`]'s probes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonarchTarget<'a> {
    /// A host of the emulation.
    Host(&'a str),
    /// An address outside it.
    Real(Ipv4Addr),
}

impl MonarchConfig {
    /// The target: a host name when the config has that host, else the address it spells
    /// (validation guarantees one of the two).
    pub fn target_kind<'a>(&'a self, hosts: &[String]) -> MonarchTarget<'a> {
        match self.target.parse::<Ipv4Addr>() {
            Ok(addr) if !hosts.iter().any(|h| h == &self.target) => MonarchTarget::Real(addr),
            _ => MonarchTarget::Host(&self.target),
        }
    }

    /// The cap on a real target's probes.
    pub fn max_rate(&self) -> Rate {
        self.max_rate.unwrap_or(DEFAULT_MAX_RATE)
    }
}

/// Why a real target's address is not one to probe without being asked to (`None`: a
/// globally reachable unicast address). After the IANA IPv4 Special-Purpose Address
/// Registry (RFC 6890 and its updates): the blocks it marks not globally reachable.
pub fn special_purpose(addr: Ipv4Addr) -> Option<&'static str> {
    const BLOCKS: &[([u8; 4], u8, &str)] = &[
        ([0, 0, 0, 0], 8, "\"this network\" (RFC 791)"),
        ([10, 0, 0, 0], 8, "private (RFC 1918)"),
        ([100, 64, 0, 0], 10, "shared address space (RFC 6598)"),
        ([127, 0, 0, 0], 8, "loopback (RFC 1122)"),
        ([169, 254, 0, 0], 16, "link-local (RFC 3927)"),
        ([172, 16, 0, 0], 12, "private (RFC 1918)"),
        ([192, 0, 0, 0], 24, "IETF protocol assignments (RFC 6890)"),
        ([192, 0, 2, 0], 24, "documentation (RFC 5737)"),
        ([192, 168, 0, 0], 16, "private (RFC 1918)"),
        ([198, 18, 0, 0], 15, "benchmarking (RFC 2544)"),
        ([198, 51, 100, 0], 24, "documentation (RFC 5737)"),
        ([203, 0, 113, 0], 24, "documentation (RFC 5737)"),
        ([224, 0, 0, 0], 4, "multicast (RFC 5771)"),
        ([240, 0, 0, 0], 4, "reserved (RFC 1112)"),
    ];
    let a = u32::from(addr);
    BLOCKS.iter().find(|(net, len, _)| a >> (32 - len) == u32::from(Ipv4Addr::from(*net)) >> (32 - len)).map(|b| b.2)
}

/// Checks `[monarch]`: sender and receiver are two different hosts; the target is a third
/// host, or an address that may be probed (a unicast one; one not globally reachable only
/// with `allow_private`) under a positive rate cap.
pub(super) fn validate(m: &MonarchConfig, hosts: &Names<'_>) -> Result<(), ConfigError> {
    for (key, h) in [("sender", &m.sender), ("receiver", &m.receiver)] {
        hosts.require(h, || format!("monarch.{key}"))?;
    }
    if m.sender == m.receiver {
        return Err(ConfigError::invalid("monarch", "sender and receiver must be two different hosts"));
    }
    if hosts.set.contains(m.target.as_str()) {
        if m.target == m.sender || m.target == m.receiver {
            return Err(ConfigError::invalid("monarch.target", "the target must be a third host, not the sender or the receiver"));
        }
        return Ok(());
    }
    let Ok(addr) = m.target.parse::<Ipv4Addr>() else {
        return Err(ConfigError::invalid(
            "monarch.target",
            format!("{:?} is neither a host of this config nor an IPv4 address", m.target),
        ));
    };
    if addr.is_broadcast() || addr.is_unspecified() {
        return Err(ConfigError::invalid("monarch.target", format!("{addr} is not a host's address")));
    }
    if let Some(why) = special_purpose(addr).filter(|_| !m.allow_private) {
        return Err(ConfigError::invalid(
            "monarch.target",
            format!("{addr} is {why}, not a host on the Internet: set allow_private = true (--allow-private) to probe it"),
        ));
    }
    if m.max_rate() == Rate::ZERO {
        return Err(ConfigError::invalid("monarch.max_rate", "a zero cap would let no probe out"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn monarch(target: &str, extra: &str) -> Result<Config, String> {
        Config::from_toml(
            &format!("hosts = [\"s\", \"r\", \"t\"]\n[monarch]\nsender = \"s\"\nreceiver = \"r\"\ntarget = \"{target}\"\n{extra}"),
            "m.toml",
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn a_target_is_a_host_or_an_address() {
        let c = monarch("t", "").unwrap();
        assert_eq!(c.monarch.as_ref().unwrap().target_kind(&c.hosts), MonarchTarget::Host("t"));
        let c = monarch("8.8.8.8", "").unwrap();
        assert_eq!(c.monarch.as_ref().unwrap().target_kind(&c.hosts), MonarchTarget::Real(Ipv4Addr::new(8, 8, 8, 8)));
        assert_eq!(c.monarch.as_ref().unwrap().max_rate(), DEFAULT_MAX_RATE);
        let e = monarch("example", "").unwrap_err();
        assert!(e.contains("monarch.target") && e.contains("neither a host") && !e.contains('\n'), "{e}");
        let e = monarch("r", "").unwrap_err();
        assert!(e.contains("monarch.target") && e.contains("third host"), "{e}");
    }

    /// Each block of the IANA registry that is not globally reachable is refused without
    /// `allow_private`, and named; its neighbours on either side are not.
    #[test]
    fn addresses_not_on_the_internet_need_allow_private() {
        for (addr, word) in [
            ("10.1.2.3", "private"),
            ("172.31.255.1", "private"),
            ("192.168.0.9", "private"),
            ("100.64.0.1", "shared"),
            ("127.0.0.1", "loopback"),
            ("169.254.3.3", "link-local"),
            ("198.19.255.254", "benchmarking"),
            ("203.0.113.5", "documentation"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
        ] {
            let e = monarch(addr, "").unwrap_err();
            assert!(e.contains("monarch.target") && e.contains(word) && e.contains("allow_private"), "{addr}: {e}");
            monarch(addr, "allow_private = true\n").unwrap_or_else(|e| panic!("{addr} with allow_private: {e}"));
        }
        for addr in ["9.255.255.255", "11.0.0.0", "172.32.0.1", "100.128.0.1", "198.20.0.1", "223.255.255.255"] {
            monarch(addr, "").unwrap_or_else(|e| panic!("{addr} is globally reachable: {e}"));
        }
    }

    #[test]
    fn no_flag_makes_a_non_host_address_a_target() {
        for addr in ["0.0.0.0", "255.255.255.255"] {
            let e = monarch(addr, "allow_private = true\n").unwrap_err();
            assert!(e.contains("not a host's address"), "{addr}: {e}");
        }
        let e = monarch("8.8.8.8", "max_rate = \"0bit\"\n").unwrap_err();
        assert!(e.contains("monarch.max_rate"), "{e}");
    }
}
