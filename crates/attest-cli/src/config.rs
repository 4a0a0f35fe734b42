//! The command line's settings: its flags become core's [`Overrides`], and core's
//! [`Settings::resolve`] settles every setting once (flag, then environment, then the
//! configuration file, then the default: the precedence lives in attest-core, nowhere
//! here). What remains is what only a command-line tool does with them: read-only
//! ledgers, signing keys with a hint, small capped input files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use attest_core::setup::{Overrides, Settings};
use attest_core::verification::ProcessEnv;
use attest_ledger::{Ledger, SigningKey, VerifierKey};
use attest_policy::{PolicyEngine, MAX_POLICY_BYTES};

use crate::cli::{Global, KeyPathArgs, TrustArgs};

pub(crate) use attest_core::setup::location_display;

/// Settings every command shares, settled by attest-core.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Every setting, with where it came from.
    pub(crate) settings: Settings,
}

impl std::ops::Deref for Config {
    type Target = Settings;

    fn deref(&self) -> &Settings {
        &self.settings
    }
}

impl Global {
    /// The global flags as core's overrides.
    pub(crate) fn overrides(&self) -> Overrides {
        Overrides {
            config: self.config.clone(),
            ledger: self.ledger.clone(),
            tenant: self.tenant.clone(),
            durability: self.durability.clone(),
            policy: self.policy.clone(),
            ..Overrides::default()
        }
    }
}

/// An environment variable, when set and not empty.
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Config {
    /// Settles the settings from `overrides` (the flags), the process environment, the
    /// configuration file and the defaults.
    pub(crate) fn resolve(overrides: &Overrides) -> anyhow::Result<Config> {
        Ok(Config {
            settings: Settings::resolve(overrides, Arc::new(ProcessEnv))?,
        })
    }

    /// [`Config::resolve`] with the global flags only.
    pub(crate) fn load(global: &Global) -> anyhow::Result<Config> {
        Config::resolve(&global.overrides())
    }

    /// The ledger's location as given (a file path or a URL).
    pub(crate) fn ledger_path(&self) -> &Path {
        &self.settings.ledger_path.value
    }

    /// The tenant, when one is set.
    pub(crate) fn tenant(&self) -> Option<&str> {
        self.settings.tenant_name()
    }

    /// The policy (see [`Settings::policy`]).
    pub(crate) fn policy(&self) -> anyhow::Result<PolicyEngine> {
        Ok(self.settings.policy()?)
    }

    /// Opens the ledger, creating it (and its directory) if `create`.
    pub(crate) fn open_ledger(&self, create: bool) -> anyhow::Result<Ledger> {
        Ok(self.settings.open_ledger(create)?)
    }

    /// Opens the ledger for reading only (verify, listings, proofs): works on a read-only
    /// file, directory or mount, and never turns an empty or foreign file into a ledger.
    pub(crate) fn open_ledger_read_only(&self) -> anyhow::Result<Ledger> {
        Ledger::open_read_only_tenant(self.ledger_path(), self.tenant())
            .with_context(|| format!("cannot open ledger {}", self.ledger_display()))
    }

    /// The signing key's path: `given` (a command's `--key`/`--out`), else the one the
    /// settings name or imply.
    pub(crate) fn key_path(&self, given: Option<&Path>) -> PathBuf {
        given.map_or_else(|| self.settings.key_path(), Path::to_path_buf)
    }

    /// Loads the signing key, with a hint when there is none.
    pub(crate) fn signing_key(&self, args: &KeyPathArgs) -> anyhow::Result<SigningKey> {
        let path = self.key_path(args.key.as_deref());
        if let Some(uri) = token_uri(&path)? {
            return Ok(SigningKey::from_token(&uri, &token_pin()?)?);
        }
        if !path.exists() {
            anyhow::bail!(
                "no signing key at {}: run `attest keygen` (or pass --key / set ATTEST_SIGNING_KEY)",
                path.display()
            );
        }
        Ok(SigningKey::load(&path)?)
    }
}

/// The token key a `pkcs11:` URI in the key setting names, or `None` for a key file.
pub(crate) fn token_uri(key: &Path) -> anyhow::Result<Option<attest_ledger::TokenKeyUri>> {
    match key.to_str().filter(|k| k.starts_with("pkcs11:")) {
        Some(uri) => Ok(Some(attest_ledger::TokenKeyUri::parse(uri)?)),
        None => Ok(None),
    }
}

/// The token's user PIN: from the 0600 file `ATTEST_PKCS11_PIN_FILE` names, else from
/// `ATTEST_PKCS11_PIN`; never from a flag or the configuration file.
pub(crate) fn token_pin() -> anyhow::Result<String> {
    let file = env_var("ATTEST_PKCS11_PIN_FILE").map(PathBuf::from);
    crate::secrets::read_secret(file.as_deref(), "ATTEST_PKCS11_PIN")?.ok_or_else(|| {
        anyhow::anyhow!(
            "a pkcs11: key needs the token's user PIN: set ATTEST_PKCS11_PIN_FILE (a file only \
             you can read) or ATTEST_PKCS11_PIN"
        )
    })
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
    // A key given twice would be ambiguous to the note verifier (and verify nothing).
    let mut unique: Vec<VerifierKey> = Vec::with_capacity(keys.len());
    for key in keys {
        if !unique.contains(&key) {
            unique.push(key);
        }
    }
    Ok(unique)
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
