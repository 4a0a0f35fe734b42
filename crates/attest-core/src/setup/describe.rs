//! What `attest config check` shows: every setting a door gets, with where it came
//! from. Secrets never appear: only the names of the variables that hold them and
//! whether those are set; URLs lose their passwords, queries and (for webhooks, whose
//! path is often the secret) their paths.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{is_url, redact_url, Settings, Source, Sourced, DEFAULT_INBOX};
use crate::config::vars;

/// One setting as shown.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    /// The setting's key (`ledger`, `notify.webhook.url`).
    pub key: String,
    /// Its value, redacted.
    pub value: Value,
    /// Where it came from.
    pub source: Source,
}

impl Settings {
    /// Every setting with its effective value (redacted) and where it came from.
    pub fn shown(&self) -> Vec<Shown> {
        let file = &self.file;
        let mut out = Vec::new();
        let mut push = |key: &str, value: Value, source: Source| {
            out.push(Shown {
                key: key.to_owned(),
                value,
                source,
            })
        };
        let path = |p: &Path| json!(p.display().to_string());
        let optional = |value: &Option<Sourced<String>>| match value {
            Some(v) => (json!(v.value), v.source),
            None => (Value::Null, Source::Default),
        };
        if let Some(file_path) = &self.file_path {
            push("config", path(&file_path.value), file_path.source);
        }
        push(
            "ledger",
            json!(self.ledger_display()),
            self.ledger_path.source,
        );
        let (value, source) = optional(&self.tenant);
        push("tenant", value, source);
        push(
            "durability",
            json!(self.durability.value.to_string()),
            self.durability.source,
        );
        match &self.policy_path {
            Some(policy) => push("policy", path(&policy.value), policy.source),
            None => push(
                "policy",
                json!("./attest.yaml if present, else the built-in default"),
                Source::Default,
            ),
        }
        let key_source = self.key.as_ref().map_or(Source::Default, |k| k.source);
        push("key", path(&self.key_path()), key_source);
        let origin = file.origin.clone().map(|value| Sourced {
            value,
            source: Source::File,
        });
        match origin {
            Some(o) => push("origin", json!(o.value), o.source),
            None => push("origin", json!("attest-ledger"), Source::Default),
        }
        for (key, value) in [
            ("agent", &self.agent),
            ("actor", &self.actor),
            ("run", &self.run),
        ] {
            let (value, source) = optional(value);
            push(key, value, source);
        }
        push("ask", json!(self.ask.value.as_str()), self.ask.source);
        push(
            "approvals.wait_secs",
            json!(self.wait.value.as_secs()),
            self.wait.source,
        );
        push(
            "approvals.use_by_secs",
            json!(self.use_by.value.as_secs()),
            self.use_by.source,
        );
        push(
            "idempotency.lifetime_secs",
            json!(self.key_lifetime.value.as_secs()),
            self.key_lifetime.source,
        );
        push(
            "idempotency.wait_secs",
            json!(self.key_wait.value.as_secs()),
            self.key_wait.source,
        );
        let paths = |list: &[PathBuf]| -> (Value, Source) {
            let shown: Vec<String> = list.iter().map(|p| p.display().to_string()).collect();
            let source = if shown.is_empty() {
                Source::Default
            } else {
                Source::File
            };
            (json!(shown), source)
        };
        for (key, list) in [("registry", &file.registry), ("recipes", &file.recipes)] {
            let (value, source) = paths(list);
            push(key, value, source);
        }
        let (value, _) = paths(&self.openapi.value);
        push("openapi", value, self.openapi.source);
        for (system, settings) in &file.systems {
            let var = crate::verification::base_url_var(system);
            let from_env = self.env.var(&var);
            let url = match (from_env, &settings.base_url) {
                (Some(url), _) => Some((url, Source::Env)),
                (None, Some(url)) => Some((url.clone(), Source::File)),
                (None, None) => None,
            };
            if let Some((url, source)) = url {
                push(
                    &format!("systems.{system}.base_url"),
                    json!(redact_url(&url)),
                    source,
                );
            }
            if let Some(var) = &settings.credential {
                push(
                    &format!("systems.{system}.credential"),
                    json!(self.variable(var)),
                    Source::File,
                );
            }
        }
        if let Some(slack) = &file.notify.slack {
            push("notify.slack.channel", json!(slack.channel), Source::File);
            let var = slack.token_env.as_deref().unwrap_or(vars::SLACK_TOKEN);
            push(
                "notify.slack.token",
                json!(self.variable(var)),
                Source::File,
            );
            push(
                "notify.slack.signing_secret",
                json!(self.variable(file.slack_signing_secret_var())),
                Source::File,
            );
        }
        if let Some(webhook) = &file.notify.webhook {
            let url = match (&webhook.url, &webhook.url_env) {
                (Some(url), _) => json!(origin_only(url)),
                (None, Some(var)) => json!(self.variable(var)),
                (None, None) => Value::Null,
            };
            push("notify.webhook.url", url, Source::File);
            let var = webhook
                .secret_env
                .as_deref()
                .unwrap_or(vars::WEBHOOK_SECRET);
            push(
                "notify.webhook.secret",
                json!(self.variable(var)),
                Source::File,
            );
        }
        if let Some(email) = &file.notify.email {
            push("notify.email.host", json!(email.host), Source::File);
            push("notify.email.port", json!(email.port), Source::File);
            push("notify.email.tls", json!(email.tls), Source::File);
            push("notify.email.from", json!(email.from), Source::File);
            push("notify.email.to", json!(email.to), Source::File);
            if let Some(user) = &email.username_env {
                push(
                    "notify.email.username",
                    json!(self.variable(user)),
                    Source::File,
                );
                let var = email.password_env.as_deref().unwrap_or(vars::SMTP_PASSWORD);
                push(
                    "notify.email.password",
                    json!(self.variable(var)),
                    Source::File,
                );
            }
        }
        let link_source = if file.notify.link_key_env.is_some() {
            Source::File
        } else {
            Source::Default
        };
        push(
            "notify.link_key",
            json!(self.variable(file.link_key_var())),
            link_source,
        );
        push(
            "notify.by",
            json!(file.notify.by),
            Source::File.when(file.notify.by != Default::default()),
        );
        let optional_file = |value: &Option<String>, default: Option<&str>| match (value, default) {
            (Some(v), _) => (json!(v), Source::File),
            (None, Some(d)) => (json!(d), Source::Default),
            (None, None) => (Value::Null, Source::Default),
        };
        let (value, source) = optional_file(&file.inbox.listen, Some(DEFAULT_INBOX));
        push("inbox.listen", value, source);
        let public_url = file.inbox.public_url.as_deref().map(redact_url);
        let (value, source) = optional_file(&public_url, None);
        push("inbox.public_url", value, source);
        let (value, source) = optional_file(&file.inbox.trusted_identity_header, None);
        push("inbox.trusted_identity_header", value, source);
        let oidc = file
            .inbox
            .oidc
            .as_ref()
            .map(|oidc| redact_url(&oidc.issuer));
        let (value, source) = optional_file(&oidc, None);
        push("inbox.oidc.issuer", value, source);
        // How agents prove who they are: off (a label), their tokens, or tokens and JWTs.
        let agents = file.agents.as_ref().map(|agents| match &agents.jwt {
            Some(jwt) => format!("tokens, and JWTs from {}", redact_url(&jwt.issuer)),
            None => "tokens".to_owned(),
        });
        let (value, source) = optional_file(&agents, None);
        push("agents", value, source);
        let upstream = file.gateway.upstream.as_deref().map(redact_url);
        let (value, source) = optional_file(&upstream, None);
        push("gateway.upstream", value, source);
        let allow = &file.gateway.allow_upstream;
        push(
            "gateway.allow_upstream",
            json!(allow),
            Source::File.when(!allow.is_empty()),
        );
        // The coding-agent hooks' asks: the agent's own prompt, or Attest's approvals.
        let approvals = match file.hook.approvals {
            Some(crate::config::HookApprovals::Attest) => "attest",
            Some(crate::config::HookApprovals::Prompt) | None => "prompt",
        };
        push(
            "hook.approvals",
            json!(approvals),
            Source::File.when(file.hook.approvals.is_some()),
        );
        // Unset, each agent's hook waits 10 s less than the agent's own hook timeout.
        push(
            "hook.wait_secs",
            file.hook
                .wait
                .map_or(Value::Null, |wait| json!(wait.as_secs())),
            Source::File.when(file.hook.wait.is_some()),
        );
        push(
            "mode",
            json!(if self.shadow { "shadow" } else { "enforce" }),
            Source::File.when(file.mode.is_some()),
        );
        out
    }

    /// `$NAME (set)` or `$NAME (not set)`: a secret's variable, never its value.
    fn variable(&self, name: &str) -> String {
        let state = if self.env.var(name).is_some() {
            "set"
        } else {
            "not set"
        };
        format!("${name} ({state})")
    }
}

impl Source {
    /// `self` when `set`, else [`Source::Default`].
    fn when(self, set: bool) -> Source {
        if set {
            self
        } else {
            Source::Default
        }
    }
}

/// A URL cut to its scheme and host: a webhook's path often is its secret.
fn origin_only(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(url) => {
            let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!(
                "{}://{}{port}/…",
                url.scheme(),
                url.host_str().unwrap_or("?")
            )
        }
        Err(_) => "(not a URL)".to_owned(),
    }
}

/// A ledger location for messages: a file as it is; a URL without its password and
/// without its query (which may carry one).
pub fn location_display(location: &Path) -> String {
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
