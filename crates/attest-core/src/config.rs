//! The configuration file (`.attest/config.yaml`): what every surface reads, once.
//!
//! A [`ConfigFile`] is parsed from YAML with unknown fields refused; an error names the
//! file, the line and column, and the field. In the paths a file names, a leading `~`
//! and `$VAR` / `${VAR}` are expanded, and relative ones are resolved against the file's
//! own directory, when it is [loaded](ConfigFile::load). Secrets are
//! never written in the file: it names the environment variables that hold them
//! (`token_env: SLACK_BOT_TOKEN`), and only those variables are read.
//!
//! From the settings, [`ConfigFile::registry`] builds the detection registry (the
//! built-in one, each `registry` file, each system's `base_url` host) and
//! [`ConfigFile::readback`] the read-back drivers (recipes with the `recipes`
//! directories, the `openapi` specs, each system's base URL and credential variable).
//! [`ConfigFile::notifiers`] builds the notifiers, their secrets read from the variables
//! the file names.
//!
//! ```
//! use attest_core::config::ConfigFile;
//!
//! # fn main() -> Result<(), attest_core::config::ConfigError> {
//! let file = ConfigFile::parse("ledger: audit.sqlite\nagent: claims-bot\n", "config.yaml")?;
//! assert_eq!(file.agent.as_deref(), Some("claims-bot"));
//! let err = ConfigFile::parse("ledgr: x\n", "config.yaml").unwrap_err();
//! assert!(err.to_string().starts_with("config.yaml:1:1: unknown field `ledgr`"));
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use thiserror::Error;

#[cfg(feature = "http")]
use crate::approvals::Secret;
use crate::approvals::{LinkSigner, Notifier};
use crate::detect::Registry;
use crate::verification::{Env, OpenApiDriver, ReadBack, RecipeDriver};

mod expand;
mod stream;

pub use stream::{OcsfStreamSettings, OtlpStreamSettings, StreamSettings, MAX_STREAM_BATCH};

/// The largest configuration file read, in bytes.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The file looked for when none is named: `.attest/config.yaml` in the working directory.
pub const DEFAULT_CONFIG_PATH: &str = ".attest/config.yaml";

/// The variable that names the configuration file.
pub const CONFIG_VAR: &str = "ATTEST_CONFIG";

/// Why a configuration file was not accepted.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_CONFIG_BYTES`].
    #[error("{path}: larger than {limit} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// The YAML does not parse, or a field is unknown or has the wrong type; `line` and
    /// `column` are 1-based (0 when the problem is the whole file).
    #[error("{origin}:{line}:{column}: {message}")]
    Parse {
        /// The file.
        origin: String,
        /// The line.
        line: usize,
        /// The column.
        column: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// A field parses but its value is not usable.
    #[error("{origin}: {field}: {message}")]
    Invalid {
        /// The file.
        origin: String,
        /// The field, as a dotted path (`notify.webhook.url`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A detection registry file named by the configuration does not load.
    #[error("{origin}: registry")]
    Registry {
        /// The configuration file.
        origin: String,
        /// Why.
        #[source]
        source: crate::DetectError,
    },
    /// A recipe directory or OpenAPI spec named by the configuration does not load.
    #[error("{origin}: read-back")]
    ReadBack {
        /// The configuration file.
        origin: String,
        /// Why.
        #[source]
        source: Box<crate::AttestError>,
    },
    /// A setting given by a door, the environment or the file has a value that is not
    /// usable (`durability: fast`), naming where it came from.
    #[error("{origin}: {setting} (from {source_of}): {message}")]
    Setting {
        /// The configuration file.
        origin: String,
        /// The setting.
        setting: &'static str,
        /// Where the value came from (`flag`, `env`, `file`).
        source_of: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The policy does not load (the error names its file and line).
    #[error(transparent)]
    Policy {
        /// Why.
        source: Box<attest_policy::PolicyError>,
    },
    /// The ledger does not open.
    #[error("cannot open ledger {location}")]
    Ledger {
        /// The ledger, its password removed.
        location: String,
        /// Why.
        #[source]
        source: Box<attest_ledger::LedgerError>,
    },
    /// A part built from the settings failed (the approval store, the pipeline).
    #[error("cannot open {what}")]
    Build {
        /// What.
        what: &'static str,
        /// Why.
        #[source]
        source: Box<crate::AttestError>,
    },
}

/// The settings of a configuration file; every field is optional.
///
/// See docs/configuration.md for every key with an example.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ConfigFile {
    /// The ledger: a file path or a database URL (`postgres://…`).
    pub ledger: Option<String>,
    /// How hard appends work to survive a crash: `full`, `normal`, `off`.
    pub durability: Option<String>,
    /// The checkpoint signing key file.
    pub key: Option<PathBuf>,
    /// The key's name, the checkpoint origin line (`attest keygen`).
    pub origin: Option<String>,
    /// The policy file.
    pub policy: Option<PathBuf>,
    /// The agent recorded for calls that name none.
    pub agent: Option<String>,
    /// The person recorded as acted for, for calls that name none.
    pub actor: Option<String>,
    /// Whether policy's verdicts are enforced (`enforce`, the default) or only recorded
    /// beside each call that runs (`shadow`).
    pub mode: Option<Enforcement>,
    /// Detection registry files, added on top of the built-in registry in order.
    #[serde(default)]
    pub registry: Vec<PathBuf>,
    /// Directories of read-back recipes, tried before the built-in ones.
    #[serde(default)]
    pub recipes: Vec<PathBuf>,
    /// OpenAPI specs (JSON or YAML): verbs for the gateway, and read-back of their writes.
    #[serde(default)]
    pub openapi: Vec<PathBuf>,
    /// Per system (`github`, `crm`): its base URL and the variable holding its credential.
    #[serde(default)]
    pub systems: BTreeMap<String, SystemSettings>,
    /// Who is told when an approval waits.
    #[serde(default)]
    pub notify: NotifySettings,
    /// How long approvals last.
    #[serde(default)]
    pub approvals: ApprovalSettings,
    /// The approval inbox (`attest serve`).
    #[serde(default)]
    pub inbox: InboxSettings,
    /// The HTTP gateway (`attest gateway`).
    #[serde(default)]
    pub gateway: GatewaySettings,
    /// Coding-agent hooks (`attest hook <agent>`).
    #[serde(default)]
    pub hook: HookSettings,
    /// Idempotency keys (`Idempotency-Key`, `idempotencyKey`, `idempotency_key=`).
    #[serde(default)]
    pub idempotency: IdempotencySettings,
    /// Authenticated agents: when set, the gateway, `mcp-proxy` and `mcp-server` name a
    /// call's agent by its credential (an `attest agents add` token, or a JWT from the
    /// organisation's identity provider), never by a label.
    pub agents: Option<AgentSettings>,
    /// Personal fields sealed under their subject's key, so a subject can be erased
    /// (`attest erase`) while the chain still verifies. Absent: nothing is sealed.
    pub personal: Option<crate::personal::PersonalSettings>,
    /// Audit rows streamed to a SIEM as they are appended: by `attest stream run`, and in
    /// the background of the gateway, `mcp-proxy` and `serve`.
    pub stream: Option<StreamSettings>,
}

/// Authenticated agents (`agents:`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AgentSettings {
    /// JWTs from the organisation's identity provider, besides per-agent tokens.
    pub jwt: Option<JwtSettings>,
    /// What a call without a credential gets [default: `refuse`].
    #[serde(default)]
    pub unauthenticated: Unauthenticated,
    /// The person each agent acts for (`billing-bot: ann@acme.com`): the requester of
    /// every call the agent's credential proves, whom separation of duties keeps from
    /// approving it, whether or not the caller also names them in a header.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub owners: std::collections::BTreeMap<String, String>,
}

/// Tokens an identity provider issues, checked against its published keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct JwtSettings {
    /// The issuer (`iss`), whose metadata names its keys unless `jwks_url` does.
    pub issuer: String,
    /// The audience (`aud`) a token must be for.
    pub audience: String,
    /// The issuer's keys (a JWKS document) [default: its metadata's `jwks_uri`].
    pub jwks_url: Option<String>,
    /// The claim naming the agent [default: `sub`].
    pub claim: Option<String>,
}

/// What a door with agents configured does with a call that carries no credential.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unauthenticated {
    /// Refuse it (401); nothing runs or is recorded.
    #[default]
    Refuse,
    /// Decide and record it as agent `unauthenticated` (`agent_auth: unauthenticated`).
    Record,
}

/// How idempotency keys behave.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct IdempotencySettings {
    /// How long a key ties retries to its first call (`24h`); the first response kept
    /// for replay is removed after it.
    #[serde(default, with = "duration")]
    pub lifetime: Option<Duration>,
    /// How long a retry waits for the first call with its key to end (`30s`).
    #[serde(default, with = "duration")]
    pub wait: Option<Duration>,
}

/// One system's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SystemSettings {
    /// The API's base URL (a self-hosted GitHub Enterprise, a sandbox, a local fake): its
    /// host is this system for detection, and read-back reads there.
    pub base_url: Option<String>,
    /// The environment variable holding the credential read-back sends for this system,
    /// instead of the one its recipe names.
    pub credential: Option<String>,
}

/// The notifiers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct NotifySettings {
    /// A Slack channel, with approve and reject buttons.
    pub slack: Option<SlackSettings>,
    /// A signed webhook.
    pub webhook: Option<WebhookSettings>,
    /// E-mail over SMTP.
    pub email: Option<EmailSettings>,
    /// A Microsoft Teams channel, through an incoming webhook or Workflows URL.
    pub teams: Option<TeamsSettings>,
    /// The variable holding the key for one-click approve/reject links
    /// [default: `ATTEST_LINK_KEY`].
    pub link_key_env: Option<String>,
    /// Which process tells people [default: `surfaces`].
    #[serde(default)]
    pub by: NotifyBy,
}

/// Whether policy's verdicts are enforced: the configuration's `mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// Refusals refuse and asks ask.
    #[default]
    Enforce,
    /// Every call is decided and runs; the verdict is recorded in the row's `shadow`
    /// field ([`AttestBuilder::shadow`](crate::AttestBuilder::shadow)).
    Shadow,
}

impl ConfigFile {
    /// Whether a door runs in shadow mode: its flag (`--shadow`, `shadow=True`) or the
    /// file's `mode: shadow`. A flag can turn shadow mode on, never off: a file that
    /// says `shadow` was written to see before enforcing.
    pub fn shadow(&self, flag: bool) -> bool {
        flag || self.mode == Some(Enforcement::Shadow)
    }
}

/// Which process sends the notices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifyBy {
    /// The process that stores the request (`mcp-proxy`, `gateway`), as soon as it is stored.
    #[default]
    Surfaces,
    /// `attest serve` only: it posts each pending request it has not posted yet (the
    /// surfaces then need no notifier secrets). A restarted inbox posts again the requests
    /// still waiting.
    Inbox,
}

/// Slack settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SlackSettings {
    /// The channel (`#approvals` or an id).
    pub channel: String,
    /// The variable holding the bot token (`xoxb-…`) [default: `ATTEST_SLACK_TOKEN`].
    pub token_env: Option<String>,
    /// The variable holding the signing secret the inbox checks button presses with
    /// [default: `ATTEST_SLACK_SIGNING_SECRET`].
    pub signing_secret_env: Option<String>,
    /// Another Web API base URL (a proxy, a local fake) [default: Slack's].
    pub api_url: Option<String>,
}

/// Microsoft Teams settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TeamsSettings {
    /// A file holding the incoming webhook or Workflows URL (the URL carries its own
    /// signature: it is a secret, so it lives in a file, not in the configuration).
    pub url_file: PathBuf,
}

/// Webhook settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WebhookSettings {
    /// The URL posted to (or give `url_env` when the URL itself is a secret).
    pub url: Option<String>,
    /// The variable holding the URL.
    pub url_env: Option<String>,
    /// The variable holding the signing secret [default: `ATTEST_WEBHOOK_SECRET`].
    pub secret_env: Option<String>,
}

/// E-mail settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EmailSettings {
    /// The SMTP server's host name.
    pub host: String,
    /// The port [default: 587 with `starttls`, 465 with `tls`, 25 with `none`].
    pub port: Option<u16>,
    /// How the connection is protected [default: `starttls`].
    #[serde(default)]
    pub tls: SmtpTls,
    /// The sender (`Attest <attest@acme.com>`).
    pub from: String,
    /// The recipients.
    pub to: Vec<String>,
    /// The variable holding the SMTP user name (no login without it).
    pub username_env: Option<String>,
    /// The variable holding the SMTP password [default: `ATTEST_SMTP_PASSWORD`].
    pub password_env: Option<String>,
}

/// How an SMTP connection is protected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpTls {
    /// STARTTLS, required.
    #[default]
    Starttls,
    /// TLS from the first byte (SMTPS).
    Tls,
    /// No encryption: only for a relay on this machine.
    None,
}

/// Approval lifetimes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ApprovalSettings {
    /// How long an approval may be used once given (`1h`, `90s`).
    #[serde(default, with = "duration")]
    pub use_by: Option<Duration>,
    /// How long a blocking call waits for a person (`5m`).
    #[serde(default, with = "duration")]
    pub wait: Option<Duration>,
}

/// Inbox settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct InboxSettings {
    /// The address to listen on (`127.0.0.1:8321`).
    pub listen: Option<String>,
    /// The inbox's public base URL, for links and the Host and Origin checks.
    pub public_url: Option<String>,
    /// A header set by an authenticating reverse proxy naming the approver.
    pub trusted_identity_header: Option<String>,
    /// Sign-in with the organisation's OpenID Connect provider at `/login`.
    pub oidc: Option<OidcSettings>,
}

/// The inbox's OpenID Connect client (`inbox.oidc`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OidcSettings {
    /// The provider's issuer URL (its discovery document is read from there).
    pub issuer: String,
    /// The inbox's client id at the provider.
    pub client_id: String,
    /// A file (mode 0600) holding the client secret; none for a public client (PKCE only).
    pub client_secret_file: Option<PathBuf>,
    /// The ID token claim naming the approver, matched to a registered approver's name
    /// [default: `email`, counted only with `email_verified: true`].
    pub claim: Option<String>,
    /// The provider guarantees `claim` names one person (an `email` it issued itself, a
    /// directory's `upn`): taken without `email_verified`. Any claim but `email` and `sub`
    /// needs it [default: false].
    #[serde(default)]
    pub claim_guaranteed: bool,
}

/// Gateway settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct GatewaySettings {
    /// The upstream base URL for requests that name none.
    pub upstream: Option<String>,
    /// Hosts (`HOST` or `HOST:PORT`) a request may name besides the upstream's.
    #[serde(default)]
    pub allow_upstream: Vec<String>,
}

/// Coding-agent hook settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct HookSettings {
    /// Who answers an `ask` [default: `prompt`].
    pub approvals: Option<HookApprovals>,
    /// How long a hook waits for an approver before it answers that the call is held
    /// (`45s`); kept below the agent's own hook timeout.
    #[serde(default, with = "duration")]
    pub wait: Option<Duration>,
    /// Run each shell command the hook lets run inside `attest sandbox`, where the agent
    /// rewrites calls at its hook (Claude Code's `updatedInput`): the protected set is
    /// read-only and Attest's state out of sight below the command's text [default: false].
    pub sandbox: Option<bool>,
}

/// Who answers an `ask` that a coding agent's hook meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookApprovals {
    /// The agent's own permission prompt: whoever sits at it decides, and nobody is
    /// authenticated (the row says so and names no approver).
    Prompt,
    /// A durable Attest approval request, announced by the notifiers and answered by a
    /// registered approver; the agent retries the same call once it is approved.
    Attest,
}

impl ConfigFile {
    /// Parses a configuration text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<ConfigFile, ConfigError> {
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge {
                path: PathBuf::from(origin),
                limit: MAX_CONFIG_BYTES,
            });
        }
        if text.trim().is_empty() {
            return Ok(ConfigFile::default());
        }
        let file: ConfigFile = serde_yaml::from_str(text).map_err(|err| {
            let (line, column) = err.location().map_or((0, 0), |l| (l.line(), l.column()));
            ConfigError::Parse {
                origin: origin.to_owned(),
                line,
                column,
                message: strip_location(&err.to_string()),
            }
        })?;
        file.validate(origin)?;
        Ok(file)
    }

    /// Reads and parses a file, expanding `~` and variables in its paths (from `env`) and
    /// resolving relative ones against its directory (see [`ConfigFile::resolve`]).
    pub fn load(path: &Path, env: &dyn Env) -> Result<ConfigFile, ConfigError> {
        let io = |source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge {
                path: path.to_path_buf(),
                limit: MAX_CONFIG_BYTES,
            });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        let origin = path.display().to_string();
        let mut file = ConfigFile::parse(&text, &origin)?;
        let dir = path.parent().unwrap_or_else(|| Path::new(""));
        file.resolve(dir, env, &origin)?;
        Ok(file)
    }

    /// Expands a leading `~` (`$HOME`) and `$VAR` / `${VAR}` in every path the file names,
    /// then makes each relative one absolute against `dir` (the ledger only when it is a
    /// path, not a URL; a URL as written is left alone). A variable that is not set in
    /// `env` is an error naming `origin` and the key, never an empty string.
    pub fn resolve(&mut self, dir: &Path, env: &dyn Env, origin: &str) -> Result<(), ConfigError> {
        let expand = |field: String, raw: &str| {
            expand::expand(raw, env).map_err(|message| ConfigError::Invalid {
                origin: origin.to_owned(),
                field,
                message,
            })
        };
        let path = |field: String, path: &mut PathBuf, join: bool| {
            if let Some(raw) = path.to_str() {
                *path = PathBuf::from(expand(field, raw)?);
            }
            if join && path.is_relative() {
                *path = dir.join(&*path);
            }
            Ok::<(), ConfigError>(())
        };
        if let Some(ledger) = self.ledger.as_mut().filter(|l| !l.contains("://")) {
            *ledger = expand("ledger".to_owned(), ledger)?;
            if !ledger.contains("://") && Path::new(ledger.as_str()).is_relative() {
                *ledger = dir.join(&*ledger).display().to_string();
            }
        }
        // A `pkcs11:` key URI names a token, not a file beside the configuration.
        let is_uri = |key: &PathBuf| key.to_str().is_some_and(|k| k.starts_with("pkcs11:"));
        if let Some(key) = self.key.as_mut().filter(|key| !is_uri(key)) {
            path("key".to_owned(), key, true)?;
        }
        if let Some(policy) = self.policy.as_mut() {
            path("policy".to_owned(), policy, true)?;
        }
        for (name, list) in [
            ("registry", &mut self.registry),
            ("recipes", &mut self.recipes),
            ("openapi", &mut self.openapi),
        ] {
            for (i, item) in list.iter_mut().enumerate() {
                path(format!("{name}[{i}]"), item, true)?;
            }
        }
        if let Some(oidc) = self.inbox.oidc.as_mut() {
            if let Some(secret) = oidc.client_secret_file.as_mut() {
                path("inbox.oidc.client_secret_file".to_owned(), secret, true)?;
            }
        }
        if let Some(teams) = self.notify.teams.as_mut() {
            // Kept relative to the working directory, as before; only expanded.
            path(
                "notify.teams.url_file".to_owned(),
                &mut teams.url_file,
                false,
            )?;
        }
        Ok(())
    }

    /// Checks what serde cannot: names of variables, URLs, non-empty lists.
    fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let invalid = |field: String, message: &str| ConfigError::Invalid {
            origin: origin.to_owned(),
            field,
            message: message.to_owned(),
        };
        let check_var = |field: &str, value: &Option<String>| {
            match value {
            Some(name) if !is_var_name(name) => Err(invalid(
                field.to_owned(),
                "not an environment variable name (letters, digits and _; the secret itself never goes in this file)",
            )),
            _ => Ok(()),
        }
        };
        let check_url = |field: String, value: &Option<String>| match value {
            Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                Err(invalid(field, "not an http:// or https:// URL"))
            }
            _ => Ok(()),
        };
        if let Some(durability) = &self.durability {
            if !matches!(durability.as_str(), "full" | "normal" | "off") {
                return Err(invalid(
                    "durability".to_owned(),
                    "expected full, normal or off",
                ));
            }
        }
        if self.idempotency.lifetime == Some(Duration::ZERO) {
            return Err(invalid(
                "idempotency.lifetime".to_owned(),
                "a key must last longer than 0s (24h is the default)",
            ));
        }
        for (name, system) in &self.systems {
            check_url(format!("systems.{name}.base_url"), &system.base_url)?;
            check_var(&format!("systems.{name}.credential"), &system.credential)?;
        }
        check_var("notify.link_key_env", &self.notify.link_key_env)?;
        if let Some(slack) = &self.notify.slack {
            if slack.channel.trim().is_empty() {
                return Err(invalid("notify.slack.channel".to_owned(), "empty"));
            }
            check_var("notify.slack.token_env", &slack.token_env)?;
            check_var("notify.slack.signing_secret_env", &slack.signing_secret_env)?;
            check_url("notify.slack.api_url".to_owned(), &slack.api_url)?;
        }
        if let Some(webhook) = &self.notify.webhook {
            if webhook.url.is_some() == webhook.url_env.is_some() {
                return Err(invalid(
                    "notify.webhook".to_owned(),
                    "give exactly one of url and url_env",
                ));
            }
            check_url("notify.webhook.url".to_owned(), &webhook.url)?;
            check_var("notify.webhook.url_env", &webhook.url_env)?;
            check_var("notify.webhook.secret_env", &webhook.secret_env)?;
        }
        if let Some(email) = &self.notify.email {
            if email.to.is_empty() {
                return Err(invalid("notify.email.to".to_owned(), "no recipients"));
            }
            if email.host.trim().is_empty() {
                return Err(invalid("notify.email.host".to_owned(), "empty"));
            }
            check_var("notify.email.username_env", &email.username_env)?;
            check_var("notify.email.password_env", &email.password_env)?;
        }
        check_url("inbox.public_url".to_owned(), &self.inbox.public_url)?;
        check_url("gateway.upstream".to_owned(), &self.gateway.upstream)?;
        if let Some(stream) = &self.stream {
            stream.validate(origin)?;
        }
        Ok(())
    }

    /// The detection registry: the built-in one, each `registry` file in order, each
    /// system's `base_url` host, then the hosts of `ATTEST_BASE_URL_<SYSTEM>` variables in
    /// `env` (the environment beats the file). `origin` names this configuration in
    /// errors.
    pub fn registry(&self, env: &dyn Env, origin: &str) -> Result<Registry, ConfigError> {
        let registry_error = |source| ConfigError::Registry {
            origin: origin.to_owned(),
            source,
        };
        let mut registry = Registry::builtin().map_err(registry_error)?;
        for path in &self.registry {
            registry.extend_file(path).map_err(registry_error)?;
        }
        for (system, settings) in &self.systems {
            if let Some(url) = &settings.base_url {
                registry.base_url(system, url);
            }
        }
        registry.base_urls_from(env);
        Ok(registry)
    }

    /// The read-back drivers: the recipes (each `recipes` directory before the built-in
    /// ones), then one OpenAPI driver per spec; each system's base URL (unless its
    /// `ATTEST_BASE_URL_<SYSTEM>` is set in `env`, which wins), and its `credential`
    /// variable read from `env` in place of the one its recipe names. The recipes tell
    /// one system's names apart with `registry` (the configured one, [`Self::registry`]).
    pub fn readback<E: Env + Clone + 'static>(
        &self,
        env: E,
        origin: &str,
        registry: Arc<Registry>,
    ) -> Result<ReadBack, ConfigError> {
        let wrap = |source| ConfigError::ReadBack {
            origin: origin.to_owned(),
            source: Box::new(source),
        };
        let mut recipes = RecipeDriver::builtin()
            .map_err(wrap)?
            .with_registry(registry);
        // The last directory listed is tried last: add them in reverse.
        for dir in self.recipes.iter().rev() {
            recipes = recipes.with_dir(dir).map_err(wrap)?;
        }
        let mut readback = ReadBack::new()
            .map_err(wrap)?
            .driver(recipes)
            .env(env.clone());
        for path in &self.openapi {
            readback = readback.driver(OpenApiDriver::from_file(path).map_err(wrap)?);
        }
        for (system, settings) in &self.systems {
            let from_env = env.var(&crate::verification::base_url_var(system));
            if let (Some(url), None) = (&settings.base_url, from_env) {
                readback = readback.base_url(system, url);
            }
            if let Some(var) = &settings.credential {
                readback = readback.credential_var(system, var);
            }
        }
        Ok(readback)
    }
}

/// The default variables secrets are read from.
pub mod vars {
    /// The one-click link key.
    pub const LINK_KEY: &str = "ATTEST_LINK_KEY";
    /// The Slack bot token.
    pub const SLACK_TOKEN: &str = "ATTEST_SLACK_TOKEN";
    /// Slack's signing secret.
    pub const SLACK_SIGNING_SECRET: &str = "ATTEST_SLACK_SIGNING_SECRET";
    /// The webhook signing secret.
    pub const WEBHOOK_SECRET: &str = "ATTEST_WEBHOOK_SECRET";
    /// The signing secret of the streamed OCSF events.
    pub const STREAM_SECRET: &str = "ATTEST_STREAM_SECRET";
    /// The SMTP password.
    pub const SMTP_PASSWORD: &str = "ATTEST_SMTP_PASSWORD";
}

impl ConfigFile {
    /// The variable holding the link key.
    pub fn link_key_var(&self) -> &str {
        self.notify
            .link_key_env
            .as_deref()
            .unwrap_or(vars::LINK_KEY)
    }

    /// The variable holding Slack's signing secret.
    pub fn slack_signing_secret_var(&self) -> &str {
        self.notify
            .slack
            .as_ref()
            .and_then(|s| s.signing_secret_env.as_deref())
            .unwrap_or(vars::SLACK_SIGNING_SECRET)
    }

    /// The notifiers the file configures, their secrets read from `env`; each gets
    /// `links` (one-click links to the inbox) when given. A notifier whose secret is not
    /// set is an error naming the variable, never a notifier that silently sends nothing.
    pub fn notifiers(
        &self,
        env: &dyn Env,
        links: Option<&LinkSigner>,
        origin: &str,
    ) -> Result<Vec<Arc<dyn Notifier>>, ConfigError> {
        let mut out: Vec<Arc<dyn Notifier>> = Vec::new();
        #[cfg(feature = "http")]
        if let Some(slack) = self.slack_notifier(env, links, origin)? {
            out.push(Arc::new(slack));
        }
        #[cfg(not(feature = "http"))]
        if self.notify.slack.is_some() {
            return Err(not_built(origin, "notify.slack", "http"));
        }
        if let Some(webhook) = &self.notify.webhook {
            out.push(self.webhook_notifier(webhook, env, links, origin)?);
        }
        if let Some(email) = &self.notify.email {
            out.push(self.email_notifier(email, env, links, origin)?);
        }
        #[cfg(feature = "http")]
        if let Some(teams) = self.teams_notifier(links, origin)? {
            out.push(Arc::new(teams));
        }
        #[cfg(not(feature = "http"))]
        if self.notify.teams.is_some() {
            return Err(not_built(origin, "notify.teams", "http"));
        }
        Ok(out)
    }

    #[cfg(feature = "http")]
    fn webhook_notifier(
        &self,
        webhook: &WebhookSettings,
        env: &dyn Env,
        links: Option<&LinkSigner>,
        origin: &str,
    ) -> Result<Arc<dyn Notifier>, ConfigError> {
        use crate::approvals::WebhookNotifier;
        let secret = |field: &str, var: &str| {
            env.var(var)
                .map(Secret::new)
                .ok_or_else(|| ConfigError::Invalid {
                    origin: origin.to_owned(),
                    field: field.to_owned(),
                    message: format!("the variable {var} is not set"),
                })
        };
        let url = match (&webhook.url, &webhook.url_env) {
            (Some(url), _) => url.clone(),
            (None, Some(var)) => {
                let url = secret("notify.webhook.url_env", var)?;
                String::from_utf8_lossy(url.expose()).into_owned()
            }
            (None, None) => {
                return Err(ConfigError::Invalid {
                    origin: origin.to_owned(),
                    field: "notify.webhook".to_owned(),
                    message: "no url".to_owned(),
                })
            }
        };
        let var = webhook
            .secret_env
            .as_deref()
            .unwrap_or(vars::WEBHOOK_SECRET);
        let mut notifier = WebhookNotifier::new(url, secret("notify.webhook.secret_env", var)?);
        if let Some(links) = links {
            notifier = notifier.with_links(links.clone());
        }
        Ok(Arc::new(notifier))
    }

    #[cfg(not(feature = "http"))]
    fn webhook_notifier(
        &self,
        _webhook: &WebhookSettings,
        _env: &dyn Env,
        _links: Option<&LinkSigner>,
        origin: &str,
    ) -> Result<Arc<dyn Notifier>, ConfigError> {
        Err(not_built(origin, "notify.webhook", "http"))
    }

    /// The Slack notifier, when the file configures one (also what updates a card once
    /// its request is decided).
    #[cfg(feature = "http")]
    pub fn slack_notifier(
        &self,
        env: &dyn Env,
        links: Option<&LinkSigner>,
        origin: &str,
    ) -> Result<Option<crate::approvals::SlackNotifier>, ConfigError> {
        let Some(slack) = &self.notify.slack else {
            return Ok(None);
        };
        let var = slack.token_env.as_deref().unwrap_or(vars::SLACK_TOKEN);
        let token = env.var(var).ok_or_else(|| ConfigError::Invalid {
            origin: origin.to_owned(),
            field: "notify.slack.token_env".to_owned(),
            message: format!("the variable {var} is not set"),
        })?;
        let mut notifier = crate::approvals::SlackNotifier::new(Secret::new(token), &slack.channel);
        if let Some(url) = &slack.api_url {
            notifier = notifier.with_base_url(url);
        }
        if let Some(links) = links {
            notifier = notifier.with_links(links.clone());
        }
        Ok(Some(notifier))
    }

    /// The Teams notifier, if configured: its URL read from `url_file`.
    #[cfg(feature = "http")]
    pub fn teams_notifier(
        &self,
        links: Option<&LinkSigner>,
        origin: &str,
    ) -> Result<Option<crate::approvals::TeamsNotifier>, ConfigError> {
        let Some(teams) = &self.notify.teams else {
            return Ok(None);
        };
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin.to_owned(),
            field: "notify.teams.url_file".to_owned(),
            message,
        };
        let path = &teams.url_file;
        let text = std::fs::read_to_string(path)
            .map_err(|err| invalid(format!("cannot read {}: {err}", path.display())))?;
        let url = text.trim();
        // Only the scheme is checked and shown: the rest of the URL is its credential.
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(invalid(format!(
                "{} does not hold an http(s) URL",
                path.display()
            )));
        }
        let mut notifier = crate::approvals::TeamsNotifier::new(url);
        if let Some(links) = links {
            notifier = notifier.with_links(links.clone());
        }
        Ok(Some(notifier))
    }

    #[cfg(feature = "email")]
    fn email_notifier(
        &self,
        email: &EmailSettings,
        env: &dyn Env,
        links: Option<&LinkSigner>,
        origin: &str,
    ) -> Result<Arc<dyn Notifier>, ConfigError> {
        use crate::approvals::{EmailNotifier, SmtpSecurity};
        let security = match email.tls {
            SmtpTls::Starttls => SmtpSecurity::StartTls,
            SmtpTls::Tls => SmtpSecurity::Tls,
            SmtpTls::None => SmtpSecurity::Plain,
        };
        let login = match &email.username_env {
            Some(user_var) => {
                let missing = |var: &str, field: &str| ConfigError::Invalid {
                    origin: origin.to_owned(),
                    field: field.to_owned(),
                    message: format!("the variable {var} is not set"),
                };
                let user = env
                    .var(user_var)
                    .ok_or_else(|| missing(user_var, "notify.email.username_env"))?;
                let pass_var = email.password_env.as_deref().unwrap_or(vars::SMTP_PASSWORD);
                let password = env
                    .var(pass_var)
                    .ok_or_else(|| missing(pass_var, "notify.email.password_env"))?;
                Some((user, Secret::new(password)))
            }
            None => None,
        };
        let port = email.port.unwrap_or_else(|| security.default_port());
        let mut notifier =
            EmailNotifier::new(&email.host, port, security, &email.from, &email.to, login)
                .map_err(|err| ConfigError::Invalid {
                    origin: origin.to_owned(),
                    field: "notify.email".to_owned(),
                    message: err.to_string(),
                })?;
        if let Some(links) = links {
            notifier = notifier.with_links(links.clone());
        }
        Ok(Arc::new(notifier))
    }

    #[cfg(not(feature = "email"))]
    fn email_notifier(
        &self,
        _email: &EmailSettings,
        _env: &dyn Env,
        _links: Option<&LinkSigner>,
        origin: &str,
    ) -> Result<Arc<dyn Notifier>, ConfigError> {
        Err(not_built(origin, "notify.email", "email"))
    }
}

/// A setting this build cannot honour, naming the attest-core feature it needs.
#[cfg(any(not(feature = "http"), not(feature = "email")))]
fn not_built(origin: &str, field: &str, feature: &str) -> ConfigError {
    ConfigError::Invalid {
        origin: origin.to_owned(),
        field: field.to_owned(),
        message: format!("this build cannot send it (attest-core feature `{feature}`)"),
    }
}

/// Whether `name` can be an environment variable's name.
fn is_var_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// serde_yaml appends ` at line L column C`: the error already carries them.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// Durations written as `90s`, `5m`, `1h` (or a whole number of seconds).
mod duration {
    use super::*;

    pub(super) fn serialize<S: serde::Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => serializer.serialize_str(&humantime::format_duration(*d).to_string()),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(u64),
            Text(String),
        }
        match Option::<Raw>::deserialize(deserializer)? {
            None => Ok(None),
            Some(Raw::Secs(secs)) => Ok(Some(Duration::from_secs(secs))),
            Some(Raw::Text(text)) => humantime::parse_duration(&text).map(Some).map_err(|err| {
                serde::de::Error::custom(format!(
                    "bad duration {text:?} ({err}); write 90s, 5m or 1h"
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::verification::ProcessEnv;

    #[test]
    fn every_key_parses() {
        let text = "
ledger: audit.sqlite
durability: normal
key: keys/signing.key
origin: acme-audit
policy: attest.yaml
agent: claims-bot
actor: alice@acme.com
mode: shadow
registry: [in-house.yaml]
recipes: [recipes]
openapi: [specs/crm.yaml]
systems:
  github: {base_url: 'http://127.0.0.1:9/api', credential: GHE_TOKEN}
notify:
  slack: {channel: '#approvals', token_env: SLACK_BOT_TOKEN}
  webhook: {url: 'https://hooks.acme.com/attest', secret_env: HOOK_SECRET}
  email: {host: smtp.acme.com, from: attest@acme.com, to: [ops@acme.com], tls: tls}
  link_key_env: LINK_KEY
approvals: {use_by: 1h, wait: 90}
inbox: {listen: '127.0.0.1:8321', public_url: 'https://attest.acme.com', trusted_identity_header: X-Forwarded-User}
gateway: {upstream: 'https://api.acme.com', allow_upstream: [api.github.com]}
";
        let mut file = ConfigFile::parse(text, "c.yaml").unwrap();
        assert!(file.shadow(false));
        assert!(!ConfigFile::default().shadow(false));
        assert!(ConfigFile::default().shadow(true));
        assert_eq!(file.approvals.use_by, Some(Duration::from_secs(3600)));
        assert_eq!(file.approvals.wait, Some(Duration::from_secs(90)));
        assert_eq!(file.notify.email.as_ref().unwrap().tls, SmtpTls::Tls);
        file.resolve(Path::new("/etc/attest"), &ProcessEnv, "c.yaml")
            .unwrap();
        assert_eq!(file.ledger.as_deref(), Some("/etc/attest/audit.sqlite"));
        assert_eq!(
            file.registry,
            vec![PathBuf::from("/etc/attest/in-house.yaml")]
        );
    }

    #[test]
    fn errors_name_the_file_line_and_field() {
        let err = ConfigFile::parse("agent: a\nnotify:\n  webhook:\n    ur: x\n", "c.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("c.yaml:4:5: notify.webhook: unknown field `ur`"),
            "{err}"
        );
        let err = ConfigFile::parse("approvals: {use_by: soon}\n", "c.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.yaml:1:") && err.contains("bad duration"),
            "{err}"
        );
        let err = ConfigFile::parse(
            "notify: {slack: {channel: x, token_env: 'xoxb-123'}}\n",
            "c.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("notify.slack.token_env"), "{err}");
        let err = ConfigFile::parse("systems: {gh: {base_url: ftp://x}}\n", "c.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("systems.gh.base_url"), "{err}");
        let err = ConfigFile::parse("agent: a\nidempotency:\n  lifetime: forever\n", "c.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.yaml:3:")
                && err.contains("idempotency")
                && err.contains("bad duration"),
            "{err}"
        );
        let err = ConfigFile::parse("idempotency: {lifetime: 0s}\n", "c.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.yaml") && err.contains("idempotency.lifetime"),
            "{err}"
        );
        let file = ConfigFile::parse("idempotency: {lifetime: 2h, wait: 5s}\n", "c.yaml").unwrap();
        assert_eq!(
            (file.idempotency.lifetime, file.idempotency.wait),
            (
                Some(Duration::from_secs(7200)),
                Some(Duration::from_secs(5))
            )
        );
    }

    #[test]
    fn a_postgres_ledger_stays_a_url() {
        let mut file = ConfigFile::parse("ledger: postgres://db/attest\n", "c").unwrap();
        file.resolve(Path::new("/etc"), &ProcessEnv, "c").unwrap();
        assert_eq!(file.ledger.as_deref(), Some("postgres://db/attest"));
    }

    #[test]
    fn a_system_base_url_is_that_system_for_detection() {
        let file = ConfigFile::parse(
            "systems: {github: {base_url: 'http://127.0.0.1:4555/api/v3'}}\n",
            "c",
        )
        .unwrap();
        let registry = file.registry(&HashMap::new(), "c").unwrap();
        let found = registry.detect_http_request(
            "POST",
            "http://127.0.0.1:4555/api/v3/repos/o/r/issues",
            [],
            None,
        );
        assert_eq!(found.system, "github");
    }

    #[test]
    fn two_systems_on_one_host_are_told_apart_by_their_ports() {
        let file = ConfigFile::parse(
            "systems:\n  acmecrm: {base_url: 'http://127.0.0.1:4555/api'}\n  billing: {base_url: 'http://127.0.0.1:4556'}\n",
            "c",
        )
        .unwrap();
        let registry = file.registry(&HashMap::new(), "c").unwrap();
        let system = |url: &str| registry.detect_http_request("POST", url, [], None).system;
        assert_eq!(system("http://127.0.0.1:4555/api/deals"), "acmecrm");
        assert_eq!(system("http://127.0.0.1:4556/invoices"), "billing");
        assert_eq!(system("127.0.0.1:4556/invoices"), "billing");
        // Another port, or another scheme, on that host is neither.
        assert_ne!(system("http://127.0.0.1:4557/invoices"), "billing");
        assert_ne!(system("https://127.0.0.1:4556/invoices"), "billing");
        assert_ne!(system("http://127.0.0.1/invoices"), "acmecrm");
    }
}
