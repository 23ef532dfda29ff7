//! Namespaces, run ids and cleanup: everything the emulator creates in the kernel is named
//! after a [`RunId`], recorded under [`STATE_ROOT`], and removed when its [`RunDir`] is
//! dropped — or, when the owner died without running it (SIGKILL, power loss of the
//! process), by [`cleanup_stale`] at the next start.
//!
//! Names: a host `h` of run `r` is the network namespace `pt-r-h`; its hosts file (read by
//! `ip netns exec` through `/etc/netns/pt-r-h/hosts`) maps every host name of the run to its
//! addresses. The TUN devices need no cleanup of their own: they are not persistent, so the
//! kernel removes them when the owning process's descriptors close, whatever way it exits.
//! Processes started in a namespace are killed before it is deleted, since a deleted
//! namespace lives on while a process is inside it.
//!
//! This module shells out to `ip(8)` (iproute2) rather than speaking rtnetlink: a namespace
//! is created a handful of times per run, and `ip netns` also maintains the `/run/netns` bind
//! mounts and `/etc/netns` conventions that users' own tools (`ip netns exec`) rely on.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where each run records its owner and hosts (tmpfs: gone after a reboot, like namespaces).
pub const STATE_ROOT: &str = "/run/pathtwin";
/// Prefix of every namespace pathtwin creates.
pub const NS_PREFIX: &str = "pt-";
/// Prefix of a run directory being prepared (`.claim-PID-ID`; see [`RunDir::claim`]).
const CLAIM_PREFIX: &str = ".claim-";
/// Buckets of the TCP socket hash table each namespace gets of its own (Linux ≥ 6.1,
/// `tcp_child_ehash_entries`). A namespace without one shares the machine's (262 144 buckets
/// on the development VM), and every dump of a namespace's sockets, which the `tcp_info`
/// sampler takes for each host and address family every interval ([`crate::sampler`]), walks
/// every bucket of it: 1.05 ms per dump there, so 4.5 ms a sample for two hosts and 27.9 ms
/// for the 13 of `examples/groundtruth/swarm.toml`. 16 384 buckets make a dump 16 times
/// shorter and still hold a short-connection soak's thousands of sockets in TIME-WAIT at a
/// chain or less per bucket.
pub const TCP_HASH_BUCKETS: u32 = 16_384;
/// Limits the kernel scales down with a namespace's own table size (to 8 192 sockets in
/// TIME-WAIT and a SYN backlog of 128 at [`TCP_HASH_BUCKETS`]); a host keeps the machine's.
const LIMITS_OF_OWN_TABLE: [&str; 2] = ["net.ipv4.tcp_max_tw_buckets", "net.ipv4.tcp_max_syn_backlog"];

/// `key` and its value in the calling thread's namespace, if it has the key.
fn machine_sysctl(key: &str) -> Option<(String, String)> {
    let value = fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/"))).ok()?;
    Some((key.to_string(), value.trim().to_string()))
}

/// Errors while creating or removing a run's kernel objects.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// A host name that cannot be part of a namespace or device name.
    #[error("host name {0:?} must be 1-24 characters of a-z, A-Z, 0-9, '_' or '-' and not start with '-'")]
    BadHostName(String),
    /// A run id given by the user that is not 4-12 lowercase hex digits.
    #[error("run id {0:?} must be 4-12 lowercase hex digits")]
    BadRunId(String),
    /// `ip` or another tool failed; the message carries its first line of stderr.
    #[error("`{cmd}` failed: {msg}")]
    Command { cmd: String, msg: String },
    /// A system call failed (with what was being done).
    #[error("{what}: {source}")]
    Os { what: String, source: io::Error },
}

fn os(what: impl Into<String>) -> impl FnOnce(io::Error) -> NetnsError {
    let what = what.into();
    move |source| NetnsError::Os { what, source }
}

/// A short random id naming one run's namespaces, state directory and address range.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(String);

impl RunId {
    /// Six hex digits from the clock and the pid: unique among the runs one machine has at
    /// a time, which is all that names need.
    pub fn generate() -> RunId {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes into the timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let mut x = (ts.tv_nsec as u64) ^ ((ts.tv_sec as u64) << 20) ^ ((std::process::id() as u64) << 40);
        // splitmix64 finalizer: spreads the bits so consecutive runs differ in every digit.
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        RunId(format!("{:06x}", x & 0xff_ffff))
    }

    pub fn parse(s: &str) -> Result<RunId, NetnsError> {
        if (4..=12).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            Ok(RunId(s.to_string()))
        } else {
            Err(NetnsError::BadRunId(s.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace of `host` in this run.
    pub fn ns_name(&self, host: &str) -> String {
        format!("{NS_PREFIX}{}-{host}", self.0)
    }

    pub fn state_dir(&self) -> PathBuf {
        Path::new(STATE_ROOT).join(&self.0)
    }

    /// A number in 0..16384 derived from the id, used to give concurrent runs distinct
    /// address ranges (see `addressing`).
    pub fn subnet_index(&self) -> u16 {
        let v = u64::from_str_radix(&self.0, 16).unwrap_or(0);
        (v % 16384) as u16
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks that a host name can be used in a namespace name and a hosts file.
pub fn check_host_name(name: &str) -> Result<(), NetnsError> {
    let ok = (1..=24).contains(&name.len())
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(NetnsError::BadHostName(name.to_string()))
    }
}

/// Runs a command and turns a non-zero exit into an error carrying its stderr.
pub fn run_cmd(cmd: &mut Command) -> Result<String, NetnsError> {
    let shown = format!("{:?}", cmd).replace('"', "");
    let out = cmd.output().map_err(os(format!("running {shown}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let msg = err.lines().next().unwrap_or("no message").trim().to_string();
        Err(NetnsError::Command { cmd: shown, msg })
    }
}

/// `ip ARGS...`
pub fn ip(args: &[&str]) -> Result<String, NetnsError> {
    run_cmd(Command::new("ip").args(args))
}

/// One network namespace created by this process; deleted (with everything in it) on drop.
#[derive(Debug)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    /// Creates the namespace with a TCP socket hash table of its own where the kernel allows
    /// ([`TCP_HASH_BUCKETS`]; the limits scaled with it stay the machine's), brings its
    /// loopback up and applies `sysctls` (`key=value`), all with one `sysctl` process.
    pub fn create(name: &str, sysctls: &[(String, String)]) -> Result<Namespace, NetnsError> {
        let own_table = add_with_own_tcp_hash(name)?;
        let ns = Namespace { name: name.to_string() };
        ns.ip(&["link", "set", "lo", "up"])?;
        // Only a table of its own scales them down. Read from this thread, which stays in the
        // creator's namespace (only `add_with_own_tcp_hash`'s own thread leaves it): the
        // machine's values.
        let mut all: Vec<(String, String)> = Vec::new();
        if own_table {
            all.extend(LIMITS_OF_OWN_TABLE.iter().filter_map(|key| machine_sysctl(key)));
        }
        all.extend(sysctls.iter().cloned());
        if !all.is_empty() {
            ns.sysctls(&all)?;
        }
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME ARGS...`
    pub fn ip(&self, args: &[&str]) -> Result<String, NetnsError> {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// Writes sysctls inside the namespace through `/proc/sys`, entered with `ip netns exec`:
    /// one `sysctl -w` for all of them (one process, not one per key).
    pub fn sysctls(&self, pairs: &[(String, String)]) -> Result<(), NetnsError> {
        let assignments = pairs.iter().map(|(k, v)| format!("{k}={v}"));
        run_cmd(Command::new("ip").args(["netns", "exec", &self.name, "sysctl", "-q", "-w"]).args(assignments)).map(|_| ())
    }

    /// Writes `/etc/netns/NAME/hosts`, which `ip netns exec` bind-mounts over `/etc/hosts`.
    pub fn write_hosts_file(&self, contents: &str) -> Result<(), NetnsError> {
        let dir = Path::new("/etc/netns").join(&self.name);
        fs::create_dir_all(&dir).map_err(os(format!("creating {}", dir.display())))?;
        fs::write(dir.join("hosts"), contents).map_err(os(format!("writing {}/hosts", dir.display())))
    }

    /// Runs `f` on a thread that has entered this namespace, so that what `f` creates
    /// (a TUN device, a packet socket) belongs to it. `setns` changes only the calling
    /// thread, which is why a scoped thread is used and then discarded.
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> io::Result<T> + Send) -> Result<T, NetnsError> {
        let path = Path::new("/run/netns").join(&self.name);
        let file = fs::File::open(&path).map_err(os(format!("opening {}", path.display())))?;
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on a valid namespace fd; affects only this thread.
                if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                f()
            })
            .join()
            .expect("namespace thread panicked")
        })
        .map_err(os(format!("inside namespace {}", self.name)))
    }
}

/// `ip netns add NAME` from a thread in a throwaway namespace whose `tcp_child_ehash_entries`
/// is [`TCP_HASH_BUCKETS`]: the kernel sizes a new namespace's TCP hash table by the setting
/// of the namespace it is created from, so the machine's own setting is never touched. Where
/// the kernel has no such setting (before 6.1), the namespace shares the machine's table, as
/// before. Returns whether the table is its own.
fn add_with_own_tcp_hash(name: &str) -> Result<bool, NetnsError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: unshare(2) moves only this thread, which ends here, into a new namespace;
            // `ip`, spawned from it, starts there. The namespace goes when both are gone.
            // Best effort: without it the host shares the machine's table.
            let own = unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0
                && fs::write("/proc/sys/net/ipv4/tcp_child_ehash_entries", TCP_HASH_BUCKETS.to_string()).is_ok();
            ip(&["netns", "add", name]).map(|_| own)
        })
        .join()
        .expect("namespace creation thread panicked")
    })
}

impl Drop for Namespace {
    fn drop(&mut self) {
        remove_namespace(&self.name);
    }
}

/// Kills every process in the namespace, deletes it and its `/etc/netns` directory.
/// Best effort: used on every exit path, where an error has nowhere better to go.
pub fn remove_namespace(name: &str) {
    if let Ok(pids) = ip(&["netns", "pids", name]) {
        for pid in pids.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
            // SAFETY: plain kill(2); the pid came from the namespace's own process list.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    let _ = ip(&["netns", "del", name]);
    let _ = fs::remove_dir_all(Path::new("/etc/netns").join(name));
}

/// The owner of a run: pid plus the process start time, so that a reused pid is not
/// mistaken for a live owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub start_ticks: u64,
}

impl Owner {
    pub fn me() -> Owner {
        let pid = std::process::id();
        Owner { pid, start_ticks: process_start_ticks(pid).unwrap_or(0) }
    }

    pub fn is_alive(&self) -> bool {
        process_start_ticks(self.pid) == Some(self.start_ticks)
    }

    fn encode(&self) -> String {
        format!("{} {}\n", self.pid, self.start_ticks)
    }

    fn decode(s: &str) -> Option<Owner> {
        let mut it = s.split_whitespace();
        Some(Owner { pid: it.next()?.parse().ok()?, start_ticks: it.next()?.parse().ok()? })
    }
}

/// Field 22 of `/proc/PID/stat` (start time in clock ticks since boot).
fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after it start past the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A run's state directory with its owner file; removed on drop.
#[derive(Debug)]
pub struct RunDir {
    id: RunId,
}

impl RunDir {
    /// Creates `/run/pathtwin/ID/owner` naming this process. The directory appears with its
    /// owner already in it: it is prepared under a name that is no run id and then renamed.
    /// An emulation starting at the same moment runs [`cleanup_stale`], which removes every
    /// run directory without a live owner; a directory created empty and then given its
    /// owner was removed in between (seen: two `pathtwin emu run` started together, one
    /// failing with "writing /run/pathtwin/ID/owner: No such file or directory").
    pub fn claim(id: &RunId) -> Result<RunDir, NetnsError> {
        let dir = id.state_dir();
        let staging = Path::new(STATE_ROOT).join(format!("{CLAIM_PREFIX}{}-{}", std::process::id(), id.as_str()));
        fs::create_dir_all(&staging).map_err(os(format!("creating {}", staging.display())))?;
        fs::write(staging.join("owner"), Owner::me().encode()).map_err(os(format!("writing {}/owner", staging.display())))?;
        if let Err(e) = fs::rename(&staging, &dir) {
            let _ = fs::remove_dir_all(&staging);
            if !dir.is_dir() {
                return Err(os(format!("creating {}", dir.display()))(e));
            }
            // The id was given again (a run id reused after its run ended): take it over,
            // the owner replaced in one step.
            let owner = dir.join("owner");
            let tmp = dir.join(format!("owner.{}", std::process::id()));
            fs::write(&tmp, Owner::me().encode()).map_err(os(format!("writing {}", tmp.display())))?;
            fs::rename(&tmp, &owner).map_err(os(format!("writing {}", owner.display())))?;
        }
        Ok(RunDir { id: id.clone() })
    }

    pub fn path(&self) -> PathBuf {
        self.id.state_dir()
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(self.id.state_dir());
    }
}

/// The runs recorded on this machine whose owner is still alive.
pub fn live_runs() -> Vec<RunId> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(STATE_ROOT) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Ok(id) = RunId::parse(&name) {
                if run_owner(&id).is_some_and(|o| o.is_alive()) {
                    out.push(id);
                }
            }
        }
    }
    out.sort();
    out
}

/// The process of a run directory being prepared (see [`RunDir::claim`]).
fn claim_pid(name: &str) -> Option<u32> {
    name.strip_prefix(CLAIM_PREFIX)?.split_once('-')?.0.parse().ok()
}

fn run_owner(id: &RunId) -> Option<Owner> {
    Owner::decode(&fs::read_to_string(id.state_dir().join("owner")).ok()?)
}

/// What [`cleanup_stale`] removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cleaned {
    pub namespaces: Vec<String>,
    pub state_dirs: Vec<String>,
}

/// Removes the namespaces, hosts files and state directories of every run whose owner is
/// no longer alive. Runs with a live owner (another emulation running now) are left alone.
pub fn cleanup_stale() -> Cleaned {
    let mut cleaned = Cleaned::default();
    // Asked of each run as it comes, not once before the walk: a run that claims its
    // directory while this one walks is alive by the time its names are met.
    let is_live = |run: &str| RunId::parse(run).ok().and_then(|id| run_owner(&id)).is_some_and(|o| o.is_alive());
    let mut names: Vec<String> = fs::read_dir("/run/netns")
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    // `/etc/netns` entries can outlive their namespace if a run died between the two steps.
    if let Ok(rd) = fs::read_dir("/etc/netns") {
        names.extend(rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()));
    }
    names.sort();
    names.dedup();
    for name in names {
        let Some(rest) = name.strip_prefix(NS_PREFIX) else { continue };
        let Some((run, _host)) = rest.split_once('-') else { continue };
        if RunId::parse(run).is_ok() && !is_live(run) {
            remove_namespace(&name);
            cleaned.namespaces.push(name);
        }
    }
    if let Ok(rd) = fs::read_dir(STATE_ROOT) {
        for e in rd.flatten() {
            let run = e.file_name().to_string_lossy().into_owned();
            if RunId::parse(&run).is_ok() && !is_live(&run) {
                let _ = fs::remove_dir_all(e.path());
                cleaned.state_dirs.push(run);
            } else if let Some(pid) = claim_pid(&run) {
                // A claim whose process died before renaming it.
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
    }
    cleaned
}

/// Duplicates a descriptor (used to hand a device to a second owner, e.g. a reader thread).
pub fn dup_fd(fd: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a valid fd returns a new fd we own, or -1.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: n is a fresh descriptor owned by no one else.
        Ok(unsafe { OwnedFd::from_raw_fd(n) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_round_trip_and_reject_garbage() {
        let id = RunId::generate();
        assert_eq!(RunId::parse(id.as_str()).unwrap(), id);
        assert!(RunId::parse("XYZ123").is_err());
        assert!(RunId::parse("abc").is_err());
        assert_eq!(RunId::parse("00ff12").unwrap().ns_name("a"), "pt-00ff12-a");
    }

    #[test]
    fn host_names_are_checked() {
        assert!(check_host_name("client-1").is_ok());
        assert!(check_host_name("").is_err());
        assert!(check_host_name("-x").is_err());
        assert!(check_host_name("a b").is_err());
        assert!(check_host_name(&"x".repeat(25)).is_err());
    }

    #[test]
    fn my_own_process_is_a_live_owner_and_a_wrong_start_time_is_not() {
        let me = Owner::me();
        assert!(me.is_alive());
        assert!(!Owner { start_ticks: me.start_ticks + 1, ..me }.is_alive());
        assert_eq!(Owner::decode(&me.encode()), Some(me));
    }
}
