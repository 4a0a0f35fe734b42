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

/// HMAC-SHA256 of `parts` (as a JSON array, so no two lists share a message) under
/// `key`, in hex: binds what Attest wrote to what it was written for.
pub fn seal(key: &[u8], parts: &[&str]) -> String {
    use hmac::Mac;
    let mut mac = match hmac::Hmac::<sha2::Sha256>::new_from_slice(key) {
        Ok(mac) => mac,
        // HMAC takes a key of any length; this arm is never taken.
        Err(_) => return String::new(),
    };
    mac.update(serde_json::json!(parts).to_string().as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `mac` is [`seal`] of `parts` under `key`, compared in constant time.
pub fn sealed(key: &[u8], parts: &[&str], mac: &str) -> bool {
    let expected = seal(key, parts);
    !expected.is_empty()
        && bool::from(subtle::ConstantTimeEq::ct_eq(
            expected.as_bytes(),
            mac.as_bytes(),
        ))
}

/// The 32-byte key in `dir/name` (0600), made from the OS's randomness on first use; of
/// two processes making it at once, both use the one written first.
pub fn key(dir: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    let path = dir.join(name);
    match std::fs::read(&path) {
        Ok(key) if key.len() == 32 => return Ok(key),
        Ok(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} is not a 32-byte key", path.display()),
            ))
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    create_private_dir(dir)?;
    let mut key = vec![0u8; 32];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut key);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(&key)?;
            file.sync_all()?;
            Ok(key)
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => std::fs::read(&path),
        Err(err) => Err(err),
    }
}
