//! The Debian package, laid out here and built by dpkg-deb (no cargo-deb to compile):
//! /usr/bin/attest stripped (its debug information is the release's .debug file), the man
//! page, completions where each shell looks, systemd units for `attest serve` and
//! `attest gateway` running as the system user attest, /etc/attest/config.yaml, and
//! maintainer scripts whose purge keeps the ledger unless asked (packaging/debian/).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::archive::{gzip, Entry, ReleaseFiles};
use crate::compile::Built;
use crate::project::{run, Project};

pub(crate) fn write(
    project: &Project,
    built: &Built,
    files: &ReleaseFiles,
    out: &Path,
) -> anyhow::Result<PathBuf> {
    let name = project.dist_name;
    let doc = format!("usr/share/doc/{name}");
    let debian = |file: &str| {
        std::fs::read(project.path(&format!("packaging/debian/{file}")))
            .with_context(|| format!("cannot read packaging/debian/{file}"))
    };
    let mut entries = vec![
        Entry::new("usr/bin/attest", std::fs::read(&built.binary)?, 0o755),
        Entry::new("usr/share/man/man1/attest.1.gz", gzip(&files.man)?, 0o644),
        Entry::new(
            "usr/share/bash-completion/completions/attest",
            files.bash.clone(),
            0o644,
        ),
        Entry::new(
            "usr/share/zsh/vendor-completions/_attest",
            files.zsh.clone(),
            0o644,
        ),
        Entry::new(
            "usr/share/fish/vendor_completions.d/attest.fish",
            files.fish.clone(),
            0o644,
        ),
        Entry::new("etc/attest/config.yaml", debian("config.yaml")?, 0o644),
        Entry::new(format!("{doc}/copyright"), files.license.clone(), 0o644),
        Entry::new(format!("{doc}/README.md"), files.readme.clone(), 0o644),
        Entry::new(
            format!("{doc}/changelog.gz"),
            gzip(&files.changelog)?,
            0o644,
        ),
    ];
    for (unit, text) in &files.units {
        entries.push(Entry::new(
            format!("lib/systemd/system/{unit}"),
            text.clone(),
            0o644,
        ));
    }
    let installed_kib: usize = entries.iter().map(|e| e.bytes.len().div_ceil(1024)).sum();
    let control = format!(
        "Package: {name}\n\
         Version: {version}\n\
         Architecture: amd64\n\
         Maintainer: Attest maintainers <attest@example.invalid>\n\
         Installed-Size: {installed_kib}\n\
         Depends: libc6 (>= {major}.{minor}), libgcc-s1, passwd\n\
         Section: admin\n\
         Priority: optional\n\
         Description: governance for AI agents' tool calls\n \
         Attest sits between an AI agent and the tools it calls: policy decides (act,\n \
         ask a person, refuse), the tool runs, the outcome is verified, and a row is\n \
         appended to a hash-chained ledger with signed checkpoints. This package holds\n \
         the attest command, its man page and completions, and systemd units for the\n \
         approval inbox (attest serve) and the HTTP gateway (attest gateway).\n",
        version = project.version,
        major = built.glibc.0,
        minor = built.glibc.1,
    );
    entries.push(Entry::new("DEBIAN/control", control.into_bytes(), 0o644));
    entries.push(Entry::new(
        "DEBIAN/conffiles",
        b"/etc/attest/config.yaml\n".to_vec(),
        0o644,
    ));
    for script in ["postinst", "prerm", "postrm"] {
        entries.push(Entry::new(
            format!("DEBIAN/{script}"),
            debian(script)?,
            0o755,
        ));
    }

    let stage = project.path("target/dist-deb");
    if stage.exists() {
        std::fs::remove_dir_all(&stage)
            .with_context(|| format!("cannot empty {}", stage.display()))?;
    }
    for entry in &entries {
        let path = stage.join(&entry.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&path, &entry.bytes)
            .with_context(|| format!("cannot write {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(entry.mode))?;
    }
    set_tree(&stage, project.epoch)?;
    let deb = out.join(format!("{name}_{}_amd64.deb", project.version));
    run(Command::new("dpkg-deb")
        .envs(project.env())
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&stage)
        .arg(&deb))?;
    Ok(deb)
}

/// Dates every file and directory under `dir` at `epoch`, directories 0755.
fn set_tree(dir: &Path, epoch: u64) -> anyhow::Result<()> {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(epoch);
    for item in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = item?.path();
        if path.is_dir() {
            set_tree(&path, epoch)?;
        } else {
            std::fs::File::options()
                .write(true)
                .open(&path)?
                .set_modified(time)?;
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    std::fs::File::open(dir)?
        .set_modified(time)
        .with_context(|| format!("cannot date {}", dir.display()))?;
    Ok(())
}
