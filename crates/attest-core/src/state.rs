//! Attest's per-user state directory: where what an agent must not reach is kept (the
//! hook's holds and the key that binds them), outside every workspace. `ATTEST_STATE_DIR`
//! names it (tests, a service's own directory), else `$XDG_STATE_HOME/attest`, else
//! `~/.local/state/attest`. Directories are 0700 and files 0600.

use std::path::{Path, PathBuf};

use crate::verification::Env;

/// The variable naming the state directory outright.
pub const STATE_DIR_VAR: &str = "ATTEST_STATE_DIR";

/// The state directory, or `None` when neither variable nor a home says where.
pub fn state_dir(env: &dyn Env) -> Option<PathBuf> {
    if let Some(dir) = env.var(STATE_DIR_VAR) {
        return Some(PathBuf::from(dir));
    }
    if let Some(xdg) = env
        .var("XDG_STATE_HOME")
        .filter(|d| Path::new(d).is_absolute())
    {
        return Some(Path::new(&xdg).join("attest"));
    }
    env.var("HOME")
        .map(|home| Path::new(&home).join(".local/state/attest"))
}

/// Creates `dir` (and its parents) readable by its owner only.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}
