//! The one release build: the `attest` binary, the Python extension and the Node addon
//! in one cargo invocation (their dependencies compiled once), then the debug information
//! split off into files of its own and the shipped files stripped.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::project::{output, run, Project, PROFILE, TARGET};

/// Where napi-derive writes the addon's type definitions while it compiles (napi's own
/// build sets the same variable); npm.rs makes binding.d.ts from them.
pub(crate) const TYPE_DEFS: &str = "target/dist-release-typedefs";

/// SOURCE_DATE_EPOCH for the compile (1980-01-01, a zip's first time), the same for every
/// commit. The `cc` crate reruns a C dependency's build (ring, SQLite) whenever the
/// variable changes, since C compilers read it for `__DATE__`, and everything above them
/// is compiled again: the commit's own time would rebuild nearly the whole graph for each
/// commit. No C source built here reads the date, so this changes no byte; it keeps one
/// that did reproducible. The commit's time dates the packaged files (project.rs).
const COMPILE_EPOCH: &str = "315532800";

pub(crate) fn build(project: &Project) -> anyhow::Result<()> {
    let type_defs = project.path(TYPE_DEFS);
    std::fs::create_dir_all(&type_defs)
        .with_context(|| format!("cannot create {}", type_defs.display()))?;
    let (rustflags, cflags) = path_maps(&project.root)?;
    run(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
            .current_dir(&project.root)
            .env("ATTEST_COMMIT", &project.commit)
            .env("SOURCE_DATE_EPOCH", COMPILE_EPOCH)
            .env("NAPI_TYPE_DEF_TMP_FOLDER", &type_defs)
            .env("RUSTFLAGS", rustflags)
            .env("CFLAGS", cflags)
            .args(["build", "--locked", "--profile", PROFILE])
            .args([
                "-p",
                "attest-cli",
                "-p",
                "attest-python",
                "-p",
                "attest-node",
            ]),
    )
}

/// RUSTFLAGS and CFLAGS that write the checkout's path as `.` and cargo's home (the
/// registry's sources) as `/cargo` wherever a compiler records a source path: the debug
/// information, and panic locations in the shipped code. Without them the `.debug` file
/// names the directory the build ran in, and the stripped binary carries that file's
/// CRC in its debug link, so a clone at another path built other bytes; they also keep
/// the build machine's home directory out of what ships. Added to the caller's own flags.
fn path_maps(root: &Path) -> anyhow::Result<(String, String)> {
    let cargo_home = match std::env::var_os("CARGO_HOME") {
        Some(home) => PathBuf::from(home),
        None => {
            PathBuf::from(std::env::var_os("HOME").context("neither CARGO_HOME nor HOME is set")?)
                .join(".cargo")
        }
    };
    let mut rustflags = std::env::var("RUSTFLAGS").unwrap_or_default();
    let mut cflags = std::env::var("CFLAGS").unwrap_or_default();
    // rustc applies the last prefix that matches, so the checkout comes last: a CARGO_HOME
    // inside it (a CI cache) is still written as the checkout's.
    for (from, to) in [(cargo_home.as_path(), "/cargo"), (root, ".")] {
        let from = from
            .to_str()
            .with_context(|| format!("{} is not UTF-8", from.display()))?;
        if from.contains(char::is_whitespace) {
            // RUSTFLAGS and CFLAGS are split at spaces.
            anyhow::bail!("the build path {from:?} holds a space; build from a path without one");
        }
        rustflags.push_str(&format!(" --remap-path-prefix={from}={to}"));
        cflags.push_str(&format!(" -ffile-prefix-map={from}={to}"));
    }
    Ok((rustflags.trim().to_owned(), cflags.trim().to_owned()))
}

/// The shipped files, stripped, beside the debug information split from them.
pub(crate) struct Built {
    /// The stripped `attest` binary.
    pub(crate) binary: PathBuf,
    /// Its debug information (line tables), which the binary names by a debug link.
    pub(crate) binary_debug: PathBuf,
    /// The stripped Python extension module.
    pub(crate) python: PathBuf,
    /// The stripped Node addon.
    pub(crate) node: PathBuf,
    /// The highest glibc symbol version the three need (the wheel's platform tag).
    pub(crate) glibc: (u32, u32),
}

impl Built {
    pub(crate) fn split(project: &Project) -> anyhow::Result<Built> {
        let from = project.root.join("target").join(PROFILE);
        let dir = project.root.join("target/dist-stripped");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let binary = dir.join("attest");
        let binary_debug = dir.join("attest.debug");
        let built = from.join("attest");
        run(Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&built)
            .arg(&binary_debug))?;
        // The debug link names the file by its base name and CRC, so a debugger finds it
        // beside the binary or under /usr/lib/debug.
        run(Command::new("objcopy")
            .args(["--strip-all", "--add-gnu-debuglink"])
            .arg(&binary_debug)
            .arg(&built)
            .arg(&binary))?;
        let python = dir.join("_attest.abi3.so");
        let node = dir.join("attest.linux-x64-gnu.node");
        for (from_name, to) in [
            ("libattest_python.so", &python),
            ("libattest_node.so", &node),
        ] {
            run(Command::new("objcopy")
                .arg("--strip-unneeded")
                .arg(from.join(from_name))
                .arg(to))?;
        }
        let mut glibc = (2, 17);
        for file in [&binary, &python, &node] {
            glibc = glibc.max(glibc_needed(file)?);
        }
        Ok(Built {
            binary,
            binary_debug,
            python,
            node,
            glibc,
        })
    }

    /// The binary's debug information as a release file of its own.
    pub(crate) fn copy_debug_info(&self, project: &Project, out: &Path) -> anyhow::Result<PathBuf> {
        let to = out.join(format!("attest-{}-{TARGET}.debug", project.version));
        std::fs::copy(&self.binary_debug, &to)
            .with_context(|| format!("cannot write {}", to.display()))?;
        Ok(to)
    }
}

/// The highest `GLIBC_2.N` symbol version a file needs, from its dynamic symbols.
fn glibc_needed(file: &Path) -> anyhow::Result<(u32, u32)> {
    let dump = output(Command::new("objdump").arg("-T").arg(file))?;
    let mut highest = (2, 0);
    for word in
        String::from_utf8_lossy(&dump).split(|c: char| c.is_whitespace() || c == '(' || c == ')')
    {
        if let Some(version) = word.strip_prefix("GLIBC_") {
            let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
            if let (Some(Some(major)), Some(Some(minor))) = (parts.next(), parts.next()) {
                highest = highest.max((major, minor));
            }
        }
    }
    Ok(highest)
}
