//! The npm packages in napi-rs's layout: `attest-agents` (the JavaScript, the types, and
//! the engine's sources for a build when no prebuilt package fits) and
//! `attest-agents-linux-x64-gnu` (the prebuilt addon and the `attest` command), which the
//! main package names in optionalDependencies so npm installs it only on that platform.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::compile::Built;
use crate::project::{output, Project};

/// napi-rs's name for the one platform built here.
const PLATFORM: &str = "linux-x64-gnu";

pub(crate) fn write(project: &Project, built: &Built, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let js = project.path("js");
    binding_types(project, &js)?;
    let platform = platform_package(project, built, out)?;
    let main = pack(&js, out)?;
    publishable(project, &main)?;
    Ok(vec![main, platform])
}

/// The main package as published: js/package.json names the platform package in
/// optionalDependencies (kept out of the repository's manifest, where `npm ci` would look
/// for it in a lock file and a registry before it exists) and the build tool only as a
/// dev dependency (install.cjs fetches it when it must build from source). The tarball is
/// rewritten in npm's own order with npm's fixed time.
fn publishable(project: &Project, tarball: &Path) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(tarball).with_context(|| format!("cannot read {}", tarball.display()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let mut entries = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.to_string_lossy().into_owned();
        let mode = entry.header().mode()?;
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut body)?;
        if path == "package/package.json" {
            body = manifest(project, &body)?;
        }
        entries.push((path, body, mode));
    }
    let mut builder = tar::Builder::new(Vec::new());
    for (path, body, mode) in &entries {
        let mut header = tar::Header::new_ustar();
        header.set_path(path)?;
        header.set_size(body.len() as u64);
        header.set_mode(*mode);
        header.set_mtime(NPM_MTIME);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        builder.append(&header, body.as_slice())?;
    }
    std::fs::write(tarball, crate::archive::gzip(&builder.into_inner()?)?)
        .with_context(|| format!("cannot write {}", tarball.display()))
}

/// npm's fixed mtime in packed tarballs (1985-10-26T08:15:00Z).
const NPM_MTIME: u64 = 499_162_500;

fn manifest(project: &Project, text: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut manifest: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(text).context("the packed package.json is not a JSON object")?;
    let mut optional = serde_json::Map::new();
    optional.insert(
        format!("{}-{PLATFORM}", project.dist_name),
        project.version.clone().into(),
    );
    manifest.insert("optionalDependencies".to_owned(), optional.into());
    if let Some(serde_json::Value::Object(deps)) = manifest.remove("dependencies") {
        let dev = manifest
            .entry("devDependencies")
            .or_insert_with(|| serde_json::Map::new().into());
        if let serde_json::Value::Object(dev) = dev {
            dev.extend(deps);
        }
    }
    Ok((serde_json::to_string_pretty(&manifest)? + "\n").into_bytes())
}

/// js/binding.d.ts, as `napi build --dts binding.d.ts` writes it: napi's own generator
/// (from js/node_modules, which `npm ci --ignore-scripts` in js/ installs) over the type
/// definitions napi-derive wrote while the release build compiled the addon.
fn binding_types(project: &Project, js: &Path) -> anyhow::Result<()> {
    const SCRIPT: &str = "const [dir, out] = process.argv.slice(1);
const { generateTypeDef } = require('@napi-rs/cli');
generateTypeDef({ typeDefDir: dir, cwd: process.cwd(), declareBindingTarget: false })
  .then(({ dts }) => require('node:fs').writeFileSync(out, dts))
  .catch((error) => { console.error(error); process.exit(1); });";
    let type_defs = project.path(crate::compile::TYPE_DEFS);
    if !type_defs.join("attest-node").exists() {
        anyhow::bail!(
            "no type definitions in {}: the addon was built without them; `touch js/src/lib.rs` and run again",
            type_defs.display()
        );
    }
    if !js.join("node_modules/@napi-rs/cli/package.json").exists() {
        anyhow::bail!("js/node_modules has no @napi-rs/cli: run `npm ci --ignore-scripts` in js/");
    }
    crate::project::run(
        Command::new("node")
            .current_dir(js)
            .args(["-e", SCRIPT])
            .arg(&type_defs)
            .arg(js.join("binding.d.ts")),
    )
}

fn platform_package(project: &Project, built: &Built, out: &Path) -> anyhow::Result<PathBuf> {
    let name = format!("{}-{PLATFORM}", project.dist_name);
    let dir = project.path("target/dist-npm").join(&name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot empty {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let addon = format!("attest.{PLATFORM}.node");
    let manifest = serde_json::json!({
        "name": name,
        "version": project.version,
        "description": format!("The prebuilt engine of {} for Linux x64 (glibc {}.{} or later), and the `attest` command.", project.dist_name, built.glibc.0, built.glibc.1),
        "license": "Apache-2.0",
        "os": ["linux"],
        "cpu": ["x64"],
        "libc": ["glibc"],
        "main": addon,
        "files": [addon, "attest"],
        "bin": {"attest": "attest"},
        "engines": {"node": ">=20.17"},
    });
    std::fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    copy(&built.node, &dir.join(&addon), 0o755)?;
    copy(&built.binary, &dir.join("attest"), 0o755)?;
    copy(&project.path("LICENSE"), &dir.join("LICENSE"), 0o644)?;
    pack(&dir, out)
}

/// `npm pack` of a package folder into `out`; returns the tarball.
fn pack(dir: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    let said = output(
        Command::new("npm")
            .current_dir(dir)
            .args(["pack", "--json", "--silent", "--pack-destination"])
            .arg(out),
    )?;
    let packed: serde_json::Value =
        serde_json::from_slice(&said).context("npm pack --json said no JSON")?;
    let file = packed
        .get(0)
        .and_then(|p| p.get("filename"))
        .and_then(|f| f.as_str())
        .context("npm pack named no tarball")?;
    Ok(out.join(file))
}

fn copy(from: &Path, to: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", to.display()))
}
