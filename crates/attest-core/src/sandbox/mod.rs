//! Enforcement below the command text: a command and everything it starts run where the
//! protected set ([`crate::protected`]) is read-only and Attest's own state is out of
//! sight, while the rest of the workspace stays writable.
//!
//! The hook judges a command by its text, and code it cannot follow (`python3 -c`, a
//! script the agent wrote, a program that writes where its options do not say) could
//! still write an agent's hook settings or Attest's own files. Inside the sandbox the
//! kernel refuses such a write (`EROFS`) however it is spelled.
//!
//! How (Linux): a user namespace and a mount namespace in which each protected path that
//! exists is bind-mounted read-only onto itself and each state directory is covered by an
//! empty read-only tmpfs; a PID namespace with its own `/proc`, so another process's
//! `/proc/PID/root` cannot reach the outside mounts; then a second user and mount
//! namespace, in which the kernel locks those mounts (`MNT_LOCKED`: a less privileged
//! namespace can neither unmount nor remount them writable), so the command cannot undo
//! them even as root. Landlock cannot express this (it grants access to whole subtrees
//! and cannot take a subtree back out of a writable workspace); read-only binds can, as
//! bubblewrap and Codex's Linux sandbox do.
//!
//! What it does not cover: a protected path that does not exist yet when the sandbox
//! starts (the plan lists it as `absent`; the hook's reading still refuses writes to it),
//! and a directory that holds protected entries being renamed whole (`mv .git x`).

#[cfg(target_os = "linux")]
mod linux;
mod plan;

pub use plan::SandboxPlan;

use std::path::PathBuf;

/// Why the sandbox could not be set up. The command does not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The kernel gives no way to build it here (not Linux).
    #[error("the sandbox needs Linux namespaces; this system has none")]
    Unsupported,
    /// A namespace could not be made (user namespaces switched off, a seccomp filter).
    #[error("could not create the sandbox's {what} namespace")]
    Namespace {
        /// Which namespace.
        what: &'static str,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// A user namespace's id map could not be written.
    #[error("could not write {file}")]
    IdMap {
        /// The file (`/proc/self/uid_map`).
        file: &'static str,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// A mount the sandbox needs failed.
    #[error("could not {what} {}", path.display())]
    Mount {
        /// What the mount was for.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
}

#[cfg(target_os = "linux")]
pub use linux::{enter, lock, Ids};

/// Not Linux: no sandbox can be built.
#[cfg(not(target_os = "linux"))]
pub fn enter(_plan: &SandboxPlan) -> Result<Ids, SandboxError> {
    Err(SandboxError::Unsupported)
}

/// Not Linux: no sandbox can be built.
#[cfg(not(target_os = "linux"))]
pub fn lock(_ids: Ids) -> Result<(), SandboxError> {
    Err(SandboxError::Unsupported)
}

/// The user and group ids outside the sandbox (what the command runs as).
#[cfg(not(target_os = "linux"))]
#[derive(Debug, Clone, Copy)]
pub struct Ids {
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
}
