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
//! Pipes (`[[pipe]]`, one path per connection for replay) take their client addresses from a
//! second range, 10.(128 + k mod 128).0.0/16: the g-th pipe of the run (file order) owns
//! `.0.1 + g`. A pipe-client host treats the whole range as local (an `ip route add local`
//! on its loopback, Linux's "AnyIP"), so its applications bind any of its pipe addresses
//! without the kernel holding thousands of them; a pipe-server host routes the range into
//! its device. Which address belongs to which pipe is the engine's routing, not the
//! kernel's.
//!
//! Inside a host the device is `pt0`, with a connected route to the whole run range, so
//! every other host is one hop away and no ARP or neighbour discovery happens (TUN is a
//! point-to-point L3 device).

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

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

/// First address of the run's pipe range (see the module docs).
pub fn pipe_net(run: &RunId) -> Ipv4Addr {
    Ipv4Addr::new(10, 128 + (run.subnet_index() % 128) as u8, 0, 0)
}

/// Address of the run's `g`-th pipe (all pipe-client hosts counted, in file order).
pub fn pipe_addr(run: &RunId, g: u32) -> Ipv4Addr {
    pathtwin_core::topology::pipe_address(pipe_net(run), g)
}

/// What the outside world needs to know about one host.
#[derive(Clone, Debug, Serialize)]
pub struct HostInfo {
    pub name: String,
    pub netns: String,
    pub ipv4: Ipv4Addr,
    pub ipv6: Ipv6Addr,
    /// As a pipe client: the address of its pipe 0; pipe `s` has this address + `s`.
    pub first_pipe: Option<Ipv4Addr>,
    /// As a pipe client: how many pipes it holds.
    pub pipes: u32,
}

impl HostInfo {
    /// The address of this host's pipe `slot`, if it holds one.
    pub fn pipe_address(&self, slot: u32) -> Option<Ipv4Addr> {
        let first = self.first_pipe.filter(|_| slot < self.pipes)?;
        Some(Ipv4Addr::from(u32::from(first) + slot))
    }
}

/// Which hosts hold pipe addresses and which route them.
#[derive(Clone, Debug, Default)]
pub struct PipePlan {
    /// Pipes per host (0 for hosts that are no pipe's client), in host order.
    pub per_host: Vec<u32>,
    /// Hosts at the server end of some pipe.
    pub servers: Vec<usize>,
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
    /// `pipes` says which hosts hold pipe addresses and which route them; `offload` opens the
    /// devices with segmentation offload (see [`crate::device`]).
    pub fn create(
        run: &RunId,
        names: &[String],
        sysctls: &[(String, String)],
        pipes: &PipePlan,
        offload: bool,
    ) -> Result<(Lab, Vec<HostPort<Tun>>), NetnsError> {
        if names.len() > MAX_HOSTS {
            return Err(NetnsError::Command { cmd: "lab".into(), msg: format!("{} hosts; at most {MAX_HOSTS} are supported", names.len()) });
        }
        for n in names {
            check_host_name(n)?;
        }
        let has_pipes = pipes.per_host.iter().any(|&n| n > 0);
        for other in live_runs() {
            // Pipe ranges are 128, not 16384: a pipe run also refuses a live run with the
            // same pipe range, whether or not that run uses it.
            let same_pipes = has_pipes && pipe_net(&other) == pipe_net(run);
            if (other.subnet_index() == run.subnet_index() || same_pipes) && other != *run {
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
        let pipe_range = format!("{}/16", pipe_net(run));
        let mut next_pipe = 0u32;
        for (i, name) in names.iter().enumerate() {
            let ns = Namespace::create(&run.ns_name(name), &all_sysctls)?;
            let tun = ns.enter(|| Tun::create(DEVICE, offload))?;
            let (v4, v6) = host_addrs(run, i);
            ns.ip(&["link", "set", DEVICE, "mtu", "1500", "txqueuelen", "10000", "up"])?;
            ns.ip(&["addr", "add", &format!("{v4}/24"), "dev", DEVICE])?;
            ns.ip(&["-6", "addr", "add", &format!("{v6}/64"), "dev", DEVICE, "nodad"])?;
            let n_pipes = pipes.per_host.get(i).copied().unwrap_or(0);
            let first_pipe = (n_pipes > 0).then(|| pipe_addr(run, next_pipe));
            if n_pipes > 0 {
                ns.ip(&["link", "set", "lo", "up"])?;
                ns.ip(&["route", "add", "local", &pipe_range, "dev", "lo"])?;
                next_pipe += n_pipes;
            }
            if pipes.servers.contains(&i) {
                ns.ip(&["route", "add", &pipe_range, "dev", DEVICE])?;
            }
            lab.hosts.push(HostInfo { name: name.clone(), netns: ns.name().to_string(), ipv4: v4, ipv6: v6, first_pipe, pipes: n_pipes });
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

    /// Writes `name` into the state directory (see [`write_state_file`]).
    pub fn write_state_file(&self, name: &str, contents: &str) -> std::io::Result<()> {
        write_state_file(&self.dir.path(), name, contents)
    }
}

/// Writes `name` into a run's state directory `dir` atomically (write, then rename), so
/// readers such as `pathtwin emu stats` never see half a file. The state directory lives on
/// whatever filesystem holds `/run`, which may be a disk: a write can wait on its journal for
/// hundreds of milliseconds, so the emulator's loop never calls this itself.
pub fn write_state_file(dir: &Path, name: &str, contents: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    fs::write(&tmp, contents)?;
    fs::rename(tmp, dir.join(name))
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
        // Pipe ranges sit above every run range and count from .0.1.
        assert_eq!(pipe_addr(&a, 0), Ipv4Addr::new(10, 129, 0, 1));
        assert_eq!(pipe_addr(&top, 300), Ipv4Addr::new(10, 255, 1, 45));
    }
}
