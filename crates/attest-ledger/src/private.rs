//! Files only their owner may read: the ledger (and the approval requests, params
//! included, that share its file), its directory, and signing keys.

use std::path::Path;

/// Creates `dir` and any missing parents; on Unix the ones created get mode 0700.
pub(crate) fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the empty file `path` with mode 0600 on Unix, unless it exists. SQLite then
/// opens it, and gives its `-wal` and `-shm` files the same mode.
pub(crate) fn create_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        // Another process made it first: it made it the same way.
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

/// The permission bits group and others have on `metadata`'s file (0 when none, and
/// always 0 where there are no such modes).
pub(crate) fn shared_bits(metadata: &std::fs::Metadata) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        metadata.permissions().mode() & 0o077
    }
    #[cfg(not(unix))]
    {
        let _ = metadata;
        0
    }
}
