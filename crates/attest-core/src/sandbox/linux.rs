//! The namespaces and mounts (Linux), in two stages: [`enter`] in the process that starts
//! the command, [`lock`] in the first process of the new PID namespace.

use std::path::Path;

use nix::errno::Errno;
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::statvfs::{statvfs, FsFlags};

use super::{SandboxError, SandboxPlan};

/// The user and group ids outside the sandbox: what the command runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
}

/// Stage one, in a process with one thread (the kernel refuses a new user namespace to
/// a process with more): new user, mount and PID namespaces; the protected paths bound
/// read-only and the state directories hidden. The next child this process starts is the
/// first process of the new PID namespace, and must call [`lock`] before anything else.
pub fn enter(plan: &SandboxPlan) -> Result<Ids, SandboxError> {
    let ids = Ids {
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
    };
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID)
        .map_err(|errno| namespace("user, mount and PID", errno))?;
    // Root inside, the caller outside: the mounts below need it; the command never runs
    // as this root (see `lock`).
    write_id_maps(0, ids.uid, 0, ids.gid)?;
    // Nothing done below reaches the outside mount table.
    mount_here(
        "keep mounts private at",
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None,
    )?;
    for path in &plan.read_only {
        bind_read_only(path)?;
    }
    for dir in &plan.hidden {
        mount_here(
            "hide",
            dir,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("mode=000,size=4k"),
        )?;
    }
    Ok(ids)
}

/// Stage two, in the first process of the new PID namespace: its own `/proc` (so no
/// `/proc/PID/root` leads to the outside mounts), then a second user and mount namespace
/// in which every mount above is locked, mapped so that the caller's ids are the
/// caller's again. What this process starts next runs as the caller, without the
/// privilege to undo a mount.
pub fn lock(ids: Ids) -> Result<(), SandboxError> {
    // The sandbox ends with the process that started it.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|errno| namespace("PID", errno))?;
    mount_here(
        "mount a /proc of its own at",
        Path::new("/proc"),
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None,
    )?;
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
        .map_err(|errno| namespace("second user and mount", errno))?;
    write_id_maps(ids.uid, 0, ids.gid, 0)
}

/// Binds `path` onto itself and makes the bind read-only, keeping the flags the kernel
/// locks on the mount it sits on (a remount that dropped `nosuid` would be refused).
fn bind_read_only(path: &Path) -> Result<(), SandboxError> {
    mount_here("bind", path, None, MsFlags::MS_BIND | MsFlags::MS_REC, None)?;
    let kept = statvfs(path)
        .map(|stat| kept_flags(stat.flags()))
        .map_err(|errno| mount_error("read the mount flags of", path, errno))?;
    mount_here(
        "make read-only",
        path,
        None,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | kept,
        None,
    )
}

fn kept_flags(flags: FsFlags) -> MsFlags {
    let pairs = [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ];
    pairs
        .into_iter()
        .filter(|(st, _)| flags.contains(*st))
        .fold(MsFlags::empty(), |all, (_, ms)| all | ms)
}

fn mount_here(
    what: &'static str,
    target: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), SandboxError> {
    let source = fstype.unwrap_or("none");
    let source = if flags.contains(MsFlags::MS_BIND) && !flags.contains(MsFlags::MS_REMOUNT) {
        target.as_os_str()
    } else {
        source.as_ref()
    };
    mount(Some(source), target, fstype, flags, data)
        .map_err(|errno| mount_error(what, target, errno))
}

/// Maps `inside` to `outside` (one id each): the only map a process may write for itself
/// without privilege over the namespace above.
fn write_id_maps(
    inside_uid: u32,
    outside_uid: u32,
    inside_gid: u32,
    outside_gid: u32,
) -> Result<(), SandboxError> {
    // Without this the kernel refuses an unprivileged gid map.
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
            return Err(SandboxError::IdMap {
                file: "/proc/self/setgroups",
                source,
            })
        }
        _ => {}
    }
    std::fs::write(
        "/proc/self/uid_map",
        format!("{inside_uid} {outside_uid} 1\n"),
    )
    .map_err(|source| SandboxError::IdMap {
        file: "/proc/self/uid_map",
        source,
    })?;
    std::fs::write(
        "/proc/self/gid_map",
        format!("{inside_gid} {outside_gid} 1\n"),
    )
    .map_err(|source| SandboxError::IdMap {
        file: "/proc/self/gid_map",
        source,
    })
}

fn namespace(what: &'static str, errno: Errno) -> SandboxError {
    SandboxError::Namespace {
        what,
        source: errno.into(),
    }
}

fn mount_error(what: &'static str, path: &Path, errno: Errno) -> SandboxError {
    SandboxError::Mount {
        what,
        path: path.to_owned(),
        source: errno.into(),
    }
}
