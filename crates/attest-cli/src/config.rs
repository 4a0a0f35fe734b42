//! Turns the command line, the environment and the configuration file into validated
//! settings, once: [`Config::load`] is the one function every command reads them through.
//!
//! Precedence, for each setting: a command-line flag, then its environment variable,
//! then the configuration file, then the built-in default. The file is `--config FILE`,
//! else `$ATTEST_CONFIG`, else `.attest/config.yaml` when it exists; a file that is
//! named but does not load is an error, never a silent fallback.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use attest_core::approvals::{LinkSigner, Notifier, Secret, SlackNotifier, DEFAULT_USE_BY};
use attest_core::config::{ConfigFile, CONFIG_VAR, DEFAULT_CONFIG_PATH};
use attest_core::verification::ProcessEnv;
use attest_core::{ReadBack, Registry};
use attest_ledger::{Durability, Ledger, LedgerOptions, SigningKey, VerifierKey};
use attest_policy::{PolicyEngine, MAX_POLICY_BYTES};

use crate::cli::{Global, KeyPathArgs, TrustArgs};

/// The ledger when nothing names one.
pub(crate) const DEFAULT_LEDGER: &str = ".attest/ledger.sqlite";
/// How long a blocking call waits for a person when nothing says.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// The inbox's address when nothing says.
pub(crate) const DEFAULT_INBOX: &str = "127.0.0.1:8321";
/// How long one-click links stay valid.
pub(crate) const LINK_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A command-line flag.
    Flag,
    /// An environment variable.
    Env,
    /// The configuration file.
    File,
    /// The built-in default.
    Default,
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Flag => "flag",
            Source::Env => "env",
            Source::File => "file",
            Source::Default => "default",
        }
    }
}

/// The first of flag, environment, file that is set, with where it came from.
pub(crate) fn pick<T>(flag: Option<T>, env: Option<T>, file: Option<T>) -> Option<(T, Source)> {
    flag.map(|v| (v, Source::Flag))
        .or_else(|| env.map(|v| (v, Source::Env)))
        .or_else(|| file.map(|v| (v, Source::File)))
}

/// An environment variable, when set and not empty.
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Settings every command shares, validated.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) ledger_path: PathBuf,
    /// `--tenant`: whose chain in the ledger.
    pub(crate) tenant: Option<String>,
    pub(crate) durability: Durability,
    pub(crate) policy_path: Option<PathBuf>,
    /// The configuration file's settings (empty when there is none).
    pub(crate) file: ConfigFile,
    /// The configuration file read, and how it was found.
    pub(crate) file_path: Option<(PathBuf, Source)>,
    /// Where the ledger, durability and policy settings came from.
    pub(crate) sources: [Source; 3],
}

impl Config {
    /// The one function every command reads its settings through: flags, then the
    /// environment, then the configuration file, then the defaults.
    pub(crate) fn load(global: &Global) -> anyhow::Result<Config> {
        let file_path = pick(
            global.config.clone(),
            env_var(CONFIG_VAR).map(PathBuf::from),
            None,
        )
        .or_else(|| {
            let local = Path::new(DEFAULT_CONFIG_PATH);
            local
                .exists()
                .then(|| (local.to_path_buf(), Source::Default))
        });
        let file = match &file_path {
            Some((path, _)) => ConfigFile::load(path)?,
            None => ConfigFile::default(),
        };
        let (ledger, ledger_source) = pick(
            global.ledger.clone(),
            env_var("ATTEST_LEDGER"),
            file.ledger.clone(),
        )
        .unwrap_or_else(|| (DEFAULT_LEDGER.to_owned(), Source::Default));
        let (durability, durability_source) = pick(
            global.durability.clone(),
            env_var("ATTEST_DURABILITY"),
            file.durability.clone(),
        )
        .unwrap_or_else(|| ("full".to_owned(), Source::Default));
        let durability = durability.parse().with_context(|| {
            format!(
                "bad durability {durability:?} (from {})",
                durability_source.as_str()
            )
        })?;
        let (policy_path, policy_source) = match pick(
            global.policy.clone(),
            env_var("ATTEST_POLICY").map(PathBuf::from),
            file.policy.clone(),
        ) {
            Some((path, source)) => (Some(path), source),
            None => (None, Source::Default),
        };
        Ok(Config {
            ledger_path: PathBuf::from(ledger),
            tenant: global.tenant.clone(),
            durability,
            policy_path,
            file,
            file_path,
            sources: [ledger_source, durability_source, policy_source],
        })
    }

    /// The configuration file's name for error messages.
    pub(crate) fn origin(&self) -> String {
        match &self.file_path {
            Some((path, _)) => path.display().to_string(),
            None => "(no configuration file)".to_owned(),
        }
    }

    /// The detection registry: built-in, `ATTEST_BASE_URL_<SYSTEM>` hosts, the file's
    /// `registry` files and `systems.*.base_url` hosts.
    pub(crate) fn registry(&self) -> anyhow::Result<Registry> {
        Ok(self.file.registry(&ProcessEnv, &self.origin())?)
    }

    /// The read-back drivers: recipes (the file's `recipes` directories first), OpenAPI
    /// specs, and each system's base URL and credential variable.
    pub(crate) fn readback(&self) -> anyhow::Result<ReadBack> {
        Ok(self.file.readback(ProcessEnv, &self.origin())?)
    }

    /// The agent recorded for calls that name none: the flag (or `ATTEST_AGENT`), else
    /// the file's `agent`.
    pub(crate) fn agent(&self, given: Option<&str>) -> Option<String> {
        given.map(str::to_owned).or_else(|| self.file.agent.clone())
    }

    /// The actor recorded for calls that name none: the flag (or `ATTEST_ACTOR`), else
    /// the file's `actor`.
    pub(crate) fn actor(&self, given: Option<&str>) -> Option<String> {
        given.map(str::to_owned).or_else(|| self.file.actor.clone())
    }

    /// How long an approval may be used: the flag, else `approvals.use_by`, else the default.
    pub(crate) fn use_by(&self, given: Option<u64>) -> Duration {
        given
            .map(Duration::from_secs)
            .or(self.file.approvals.use_by)
            .unwrap_or(DEFAULT_USE_BY)
    }

    /// How long a blocking call waits: the flag, else `approvals.wait`, else 300 s.
    pub(crate) fn wait(&self, given: Option<u64>) -> Duration {
        given
            .map(Duration::from_secs)
            .or(self.file.approvals.wait)
            .unwrap_or(DEFAULT_WAIT)
    }

    /// The inbox's public base URL (for links): `inbox.public_url`, else
    /// `http://` and `inbox.listen`, else the default address.
    pub(crate) fn inbox_url(&self) -> String {
        match (&self.file.inbox.public_url, &self.file.inbox.listen) {
            (Some(url), _) => url.trim_end_matches('/').to_owned(),
            (None, Some(listen)) => format!("http://{listen}"),
            (None, None) => format!("http://{DEFAULT_INBOX}"),
        }
    }

    /// The one-click link signer, when the link key's variable is set.
    pub(crate) fn link_signer(&self) -> Option<LinkSigner> {
        let key = env_var(self.file.link_key_var())?;
        Some(LinkSigner::new(
            Secret::new(key),
            self.inbox_url(),
            LINK_TTL,
        ))
    }

    /// The Slack notifier, when configured: the inbox updates cards with it.
    pub(crate) fn slack(&self) -> anyhow::Result<Option<Arc<SlackNotifier>>> {
        let links = self.link_signer();
        Ok(self
            .file
            .slack_notifier(&ProcessEnv, links.as_ref(), &self.origin())?
            .map(Arc::new))
    }

    /// The notifiers the file configures, each with one-click links when the link key
    /// is set. Their secrets come from the variables the file names.
    pub(crate) fn notifiers(&self) -> anyhow::Result<Vec<Arc<dyn Notifier>>> {
        let links = self.link_signer();
        Ok(self
            .file
            .notifiers(&ProcessEnv, links.as_ref(), &self.origin())?)
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

    /// The signing key's path: `--key`, `ATTEST_SIGNING_KEY`, the file's `key`, else
    /// `signing.key` beside the ledger (`.attest/` for a PostgreSQL ledger); a tenant's is
    /// `signing.TENANT.key`, so each tenant signs with a key (and origin) of its own.
    pub(crate) fn key_path(&self, given: Option<&Path>) -> PathBuf {
        if let Some(path) = given.or(self.file.key.as_deref()) {
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
