//! Which process claimed a call, and whether it is known to be gone: a call left open
//! by a process that is gone will never record its outcome, so its intent can be
//! reconciled; one whose process may still be running cannot (its call may land yet).
//!
//! A process is named `linux:<boot id>:<pid>:<start time>` where `/proc` says so:
//! the boot id tells this host and boot from another (or a reboot, which ended every
//! process of the old one, but looks the same as another host and is treated so), the
//! start time tells the process from a later one given the same pid. It is gone when
//! the name is of this host and boot and no process with that pid and start time
//! exists. Anywhere else (another host, another system, a name that does not parse)
//! nothing is known, and the call counts as possibly running: fail closed.

use std::sync::OnceLock;

/// This process's name, computed once.
pub(crate) fn this_process() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let pid = std::process::id();
        match (boot_id(), start_time(pid)) {
            (Some(boot), Some(start)) => format!("linux:{boot}:{pid}:{start}"),
            _ => format!("pid:{pid}"),
        }
    })
}

/// Whether the process named `owner` is known to be gone (never for a name of
/// another host or boot, or one that does not parse).
pub(crate) fn is_gone(owner: &str) -> bool {
    let mut parts = owner.split(':');
    let (Some("linux"), Some(boot), Some(pid), Some(start), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    let (Ok(pid), Some(here)) = (pid.parse::<u32>(), boot_id()) else {
        return false;
    };
    if boot != here {
        return false;
    }
    // The pid is free, or another process holds it now.
    start_time(pid).is_none_or(|now| now != start)
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`).
fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains(':')).then(|| id.to_owned())
}

/// When process `pid` started, in clock ticks after boot (field 22 of
/// `/proc/<pid>/stat`), if it exists.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let start = rest.split_whitespace().nth(19)?;
    start
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| start.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_finished_child_is_gone() {
        let me = this_process();
        assert!(!is_gone(me), "{me}");
        if !me.starts_with("linux:") {
            return;
        }
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let (boot, start) = (boot_id(), start_time(pid));
        child.wait().unwrap();
        let name = match (boot, start) {
            (Some(boot), Some(start)) => format!("linux:{boot}:{pid}:{start}"),
            // It ended before its start time was read: a made-up start time stands for it.
            (Some(boot), None) => format!("linux:{boot}:{pid}:1"),
            _ => return,
        };
        assert!(is_gone(&name), "{name}");
        // Another boot, or a name that does not parse, is never known to be gone.
        let other = name.replacen(&boot_id().unwrap(), "another-boot", 1);
        assert!(!is_gone(&other));
        assert!(!is_gone("pid:1"));
        assert!(!is_gone("linux:x"));
    }
}
