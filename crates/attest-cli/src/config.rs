//! Turns the command line and environment into validated settings, once.

use std::path::{Path, PathBuf};

use anyhow::Context;
use attest_ledger::{Durability, Ledger, LedgerOptions, SigningKey, VerifierKey};
use attest_policy::{PolicyEngine, MAX_POLICY_BYTES};

use crate::cli::{Global, KeyPathArgs, TrustArgs};

/// Settings every command shares, validated.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) ledger_path: PathBuf,
    /// `--tenant`: whose chain in the ledger.
    pub(crate) tenant: Option<String>,
    pub(crate) durability: Durability,
    pub(crate) policy_path: Option<PathBuf>,
}

impl Config {
    pub(crate) fn from_global(global: &Global) -> anyhow::Result<Config> {
        let durability = global
            .durability
            .parse()
            .context("bad --durability (or ATTEST_DURABILITY)")?;
        Ok(Config {
            ledger_path: global.ledger.clone(),
            tenant: global.tenant.clone(),
            durability,
            policy_path: global.policy.clone(),
        })
    }

    /// The policy: `--policy` / `ATTEST_POLICY`, else `./attest.yaml` if it exists,
    /// else the built-in default. A file that does not load is an error, never a
    /// silent fallback to the default.
    pub(crate) fn policy(&self) -> anyhow::Result<PolicyEngine> {
        let local = Path::new("attest.yaml");
        let path = match &self.policy_path {
            Some(path) => Some(path.as_path()),
            None if local.exists() => Some(local),
            None => None,
        };
        match path {
            Some(path) => load_policy(path),
            None => Ok(PolicyEngine::default_policy()?),
        }
    }

    /// Opens the ledger, creating it (and its directory) if `create`.
    pub(crate) fn open_ledger(&self, create: bool) -> anyhow::Result<Ledger> {
        let options = LedgerOptions {
            durability: self.durability,
            create,
            tenant: self.tenant.clone(),
            ..LedgerOptions::default()
        };
        Ledger::open(&self.ledger_path, options)
            .with_context(|| format!("cannot open ledger {}", self.ledger_display()))
    }

    /// The ledger as messages name it: a URL without its password or options.
    pub(crate) fn ledger_display(&self) -> String {
        location_display(&self.ledger_path)
    }

    /// Opens the ledger for reading only (verify, listings, proofs): works on a read-only
    /// file, directory or mount, and never turns an empty or foreign file into a ledger.
    pub(crate) fn open_ledger_read_only(&self) -> anyhow::Result<Ledger> {
        Ledger::open_read_only_tenant(&self.ledger_path, self.tenant.as_deref())
            .with_context(|| format!("cannot open ledger {}", self.ledger_display()))
    }

    /// The signing key's path: `--key`, `ATTEST_SIGNING_KEY`, else `signing.key` beside
    /// the ledger (`.attest/` for a PostgreSQL ledger); a tenant's is
    /// `signing.TENANT.key`, so each tenant signs with a key (and origin) of its own.
    pub(crate) fn key_path(&self, given: Option<&Path>) -> PathBuf {
        if let Some(path) = given {
            return path.to_path_buf();
        }
        let dir = if is_url(&self.ledger_path) {
            Path::new(".attest")
        } else {
            self.ledger_path.parent().unwrap_or_else(|| Path::new(""))
        };
        match &self.tenant {
            Some(tenant) => dir.join(format!("signing.{tenant}.key")),
            None => dir.join("signing.key"),
        }
    }

    /// Loads the signing key, with a hint when there is none.
    pub(crate) fn signing_key(&self, args: &KeyPathArgs) -> anyhow::Result<SigningKey> {
        let path = self.key_path(args.key.as_deref());
        if !path.exists() {
            anyhow::bail!(
                "no signing key at {}: run `attest keygen` (or pass --key / set ATTEST_SIGNING_KEY)",
                path.display()
            );
        }
        Ok(SigningKey::load(&path)?)
    }
}

/// Whether a `--ledger` value is a PostgreSQL URL rather than a file.
pub(crate) fn is_url(location: &Path) -> bool {
    location
        .to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// A ledger location for messages: a file as it is; a URL without its password and
/// without its query (which may carry one).
pub(crate) fn location_display(location: &Path) -> String {
    let text = location.display().to_string();
    if !is_url(location) {
        return text;
    }
    let text = text.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_owned();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}@{host}")
        }
        None => format!("{scheme}://{rest}"),
    }
}

/// The trusted verifier keys from `--vkey` and `--vkey-file`, else from `ATTEST_VKEY`:
/// keys given on the command line replace the environment's, never add to them.
pub(crate) fn trusted_keys(args: &TrustArgs) -> anyhow::Result<Vec<VerifierKey>> {
    let mut keys = Vec::new();
    for text in &args.vkeys {
        keys.push(VerifierKey::parse(text, "--vkey")?);
    }
    for path in &args.vkey_files {
        keys.push(VerifierKey::load(path)?);
    }
    if let Some(env) = args.vkey_env.as_ref().filter(|_| keys.is_empty()) {
        for text in env.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            keys.push(VerifierKey::parse(text, "ATTEST_VKEY")?);
        }
    }
    Ok(keys)
}

/// Reads a small input file (a note, a proof) with a size cap, naming it in errors.
pub(crate) fn read_capped(path: &Path, cap: u64) -> anyhow::Result<Vec<u8>> {
    let metadata =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if metadata.len() > cap {
        anyhow::bail!(
            "{} is {} bytes; the limit is {cap}",
            path.display(),
            metadata.len()
        );
    }
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Reads and compiles a policy file.
pub(crate) fn load_policy(path: &Path) -> anyhow::Result<PolicyEngine> {
    let text = read_text(path, MAX_POLICY_BYTES as u64)?;
    Ok(PolicyEngine::from_yaml(&text, &path.display().to_string())?)
}

/// Reads a small UTF-8 file with a size cap, naming it in errors.
pub(crate) fn read_text(path: &Path, cap: u64) -> anyhow::Result<String> {
    let bytes = read_capped(path, cap)?;
    String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8 text", path.display()))
}
