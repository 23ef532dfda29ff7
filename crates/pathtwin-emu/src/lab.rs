//! The hosts of one run as kernel objects: a namespace per host with a TUN device, its
//! addresses, routes, sysctls and hosts file, plus the run's state directory that lets
//! `pathtwin emu exec/stats/down` and the next start's stale cleanup find them.
//!
//! Address plan: run `r` owns 10.(64 + k/256).(k mod 256).0/24 and fd70:7477:0:k::/64 with
//! k = [`RunId::subnet_index`]; host i (in config order) is .(i+1) / ::(i+1). Distinct runs
//! therefore get distinct ranges (up to a hash collision between two live runs, which
//! [`Lab::create`] refuses), although namespaces would keep equal addresses apart anyway:
//! distinct ranges keep captures and logs of concurrent runs unambiguous.
//!
//! Inside a host the device is `pt0`, with a connected route to the whole run range, so
//! every other host is one hop away and no ARP or neighbour discovery happens (TUN is a
//! point-to-point L3 device).

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use serde::Serialize;

use crate::device::Tun;
use crate::engine::HostPort;
use crate::netns::{check_host_name, live_runs, Namespace, NetnsError, RunDir, RunId};

/// Name of the emulator's device inside every host.
pub const DEVICE: &str = "pt0";
/// Most hosts one run can have (one /24).
pub const MAX_HOSTS: usize = 250;

/// The run's addresses for host number `i`.
pub fn host_addrs(run: &RunId, i: usize) -> (Ipv4Addr, Ipv6Addr) {
    let k = run.subnet_index();
    let v4 = Ipv4Addr::new(10, 64 + (k / 256) as u8, (k % 256) as u8, (i + 1) as u8);
    let v6 = Ipv6Addr::new(0xfd70, 0x7477, 0, k, 0, 0, 0, (i + 1) as u16);
    (v4, v6)
}

/// What the outside world needs to know about one host.
#[derive(Clone, Debug, Serialize)]
pub struct HostInfo {
    pub name: String,
    pub netns: String,
    pub ipv4: Ipv4Addr,
    pub ipv6: Ipv6Addr,
}

/// Kernel setup every host gets, before the user's `[tcp]` settings.
fn base_sysctls() -> Vec<(String, String)> {
    [
        // Every connection starts from the configured state, not from metrics cached by an
        // earlier connection to the same peer (ssthresh, RTT), which would couple runs.
        ("net.ipv4.tcp_no_metrics_save", "1"),
        // Addresses are usable at once (no duplicate-address detection delay) and the
        // kernel does not send router solicitations that nothing would answer.
        ("net.ipv6.conf.all.accept_dad", "0"),
        ("net.ipv6.conf.default.accept_dad", "0"),
        ("net.ipv6.conf.default.router_solicitations", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The namespaces, devices and state directory of one run. Dropping it removes them all.
pub struct Lab {
    run: RunId,
    hosts: Vec<HostInfo>,
    // Declared before `dir` so the namespaces go first, then the record of them.
    namespaces: Vec<Namespace>,
    dir: RunDir,
}

impl Lab {
    /// Creates one host per name; returns the lab and the hosts' device ends for the engine.
    /// `sysctls` (e.g. `net.ipv4.tcp_congestion_control=cubic`) apply to every host.
    /// On any error everything created so far is removed.
    pub fn create(run: &RunId, names: &[String], sysctls: &[(String, String)]) -> Result<(Lab, Vec<HostPort<Tun>>), NetnsError> {
        if names.len() > MAX_HOSTS {
            return Err(NetnsError::Command { cmd: "lab".into(), msg: format!("{} hosts; at most {MAX_HOSTS} are supported", names.len()) });
        }
        for n in names {
            check_host_name(n)?;
        }
        for other in live_runs() {
            if other.subnet_index() == run.subnet_index() && other != *run {
                return Err(NetnsError::Command {
                    cmd: "lab".into(),
                    msg: format!("run {other} already uses this address range; start again for a new run id"),
                });
            }
        }
        let dir = RunDir::claim(run)?;
        let mut lab = Lab { run: run.clone(), hosts: Vec::new(), namespaces: Vec::new(), dir };
        let mut ports = Vec::new();
        let mut all_sysctls = base_sysctls();
        all_sysctls.extend_from_slice(sysctls);
        for (i, name) in names.iter().enumerate() {
            let ns = Namespace::create(&run.ns_name(name), &all_sysctls)?;
            let tun = ns.enter(|| Tun::create(DEVICE))?;
            let (v4, v6) = host_addrs(run, i);
            ns.ip(&["link", "set", DEVICE, "mtu", "1500", "txqueuelen", "10000", "up"])?;
            ns.ip(&["addr", "add", &format!("{v4}/24"), "dev", DEVICE])?;
            ns.ip(&["-6", "addr", "add", &format!("{v6}/64"), "dev", DEVICE, "nodad"])?;
            lab.hosts.push(HostInfo { name: name.clone(), netns: ns.name().to_string(), ipv4: v4, ipv6: v6 });
            lab.namespaces.push(ns);
            ports.push(HostPort { name: name.clone(), device: tun, addrs: vec![IpAddr::V4(v4), IpAddr::V6(v6)] });
        }
        let hosts_file = lab.hosts_file();
        for ns in &lab.namespaces {
            ns.write_hosts_file(&hosts_file)?;
        }
        Ok((lab, ports))
    }

    /// `/etc/hosts` for every host: loopback plus every host of the run by name.
    fn hosts_file(&self) -> String {
        let mut s = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
        for h in &self.hosts {
            s += &format!("{}\t{}\n{}\t{}\n", h.ipv4, h.name, h.ipv6, h.name);
        }
        s
    }

    pub fn run_id(&self) -> &RunId {
        &self.run
    }
    pub fn hosts(&self) -> &[HostInfo] {
        &self.hosts
    }
    /// The hosts' namespaces, in the order of [`Lab::hosts`].
    pub fn namespaces(&self) -> &[Namespace] {
        &self.namespaces
    }
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path()
    }

    /// Writes `name` into the state directory atomically (write, then rename), so readers
    /// such as `pathtwin emu stats` never see half a file.
    pub fn write_state_file(&self, name: &str, contents: &str) -> std::io::Result<()> {
        let dir = self.dir.path();
        let tmp = dir.join(format!(".{name}.tmp"));
        fs::write(&tmp, contents)?;
        fs::rename(tmp, dir.join(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_plan_is_per_run_and_per_host() {
        let a = RunId::parse("000001").unwrap();
        let b = RunId::parse("000002").unwrap();
        assert_eq!(host_addrs(&a, 0).0, Ipv4Addr::new(10, 64, 1, 1));
        assert_eq!(host_addrs(&a, 2).0, Ipv4Addr::new(10, 64, 1, 3));
        assert_ne!(host_addrs(&a, 0).0, host_addrs(&b, 0).0);
        assert_eq!(host_addrs(&b, 1).1, "fd70:7477:0:2::2".parse::<Ipv6Addr>().unwrap());
        let top = RunId::parse("003fff").unwrap();
        assert_eq!(host_addrs(&top, 0).0, Ipv4Addr::new(10, 127, 255, 1));
    }
}
