//! `stream:`: every appended row also sent to a SIEM, from a cursor kept in the ledger
//! (the streamer lives in `attest-doors`' `stream` module; this is only what the file
//! says, checked).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{duration, is_var_name, ConfigError};

/// Audit rows streamed as they are appended (`stream:`); at least one sink.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct StreamSettings {
    /// Each row as an OpenTelemetry log record over OTLP/HTTP (protobuf).
    pub otlp: Option<OtlpStreamSettings>,
    /// Each row as an OCSF API Activity event, POSTed as JSON and signed like the webhook.
    pub ocsf: Option<OcsfStreamSettings>,
    /// Rows per request (100; at most 1000).
    pub batch: Option<usize>,
    /// How often a streamer that caught up looks for new rows (`1s`).
    #[serde(default, with = "duration")]
    pub poll: Option<Duration>,
    /// How long a streamer's lease on a sink's cursor lasts unless renewed (`30s`).
    #[serde(default, with = "duration")]
    pub lease: Option<Duration>,
    /// The longest wait between retries while a sink is down (`30s`).
    #[serde(default, with = "duration")]
    pub max_backoff: Option<Duration>,
    /// How long one request may take (`10s`).
    #[serde(default, with = "duration")]
    pub timeout: Option<Duration>,
}

/// The OTLP sink (`stream.otlp`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OtlpStreamSettings {
    /// The collector's base URL (`http://127.0.0.1:4318`); records go to `/v1/logs` under
    /// it, as with `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: Option<String>,
    /// The variable holding the endpoint, when the URL itself is a secret.
    pub endpoint_env: Option<String>,
    /// The variable holding request headers (`Authorization=Bearer …,X-Scope=…`, the
    /// form of `OTEL_EXPORTER_OTLP_HEADERS`).
    pub headers_env: Option<String>,
}

/// The OCSF sink (`stream.ocsf`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OcsfStreamSettings {
    /// The URL each batch is POSTed to.
    pub url: Option<String>,
    /// The variable holding the URL, when the URL itself is a secret.
    pub url_env: Option<String>,
    /// The variable holding the signing secret [default: `ATTEST_STREAM_SECRET`].
    pub secret_env: Option<String>,
}

/// The most rows one request carries.
pub const MAX_STREAM_BATCH: usize = 1000;

impl StreamSettings {
    /// Checks what serde cannot: a sink, one URL each, variable names, URL schemes, no
    /// credentials in a URL written in the file, the batch's bounds.
    pub(super) fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let invalid = |field: &str, message: &str| ConfigError::Invalid {
            origin: origin.to_owned(),
            field: field.to_owned(),
            message: message.to_owned(),
        };
        if self.otlp.is_none() && self.ocsf.is_none() {
            return Err(invalid("stream", "no sink: give otlp, ocsf or both"));
        }
        let var = |field: &str, value: &Option<String>| match value {
            Some(name) if !is_var_name(name) => Err(invalid(
                field,
                "not an environment variable name (the secret itself never goes in this file)",
            )),
            _ => Ok(()),
        };
        let url = |field: &str, given: &Option<String>, from_env: &Option<String>| {
            if given.is_some() == from_env.is_some() {
                return Err(invalid(
                    field,
                    "give exactly one of the URL and its _env variable",
                ));
            }
            if let Some(text) = given {
                let parsed = has_userinfo(text).map_err(|m| invalid(field, m))?;
                if parsed {
                    return Err(invalid(
                        field,
                        "the URL carries a user or password: put it in a variable (_env) instead",
                    ));
                }
            }
            Ok(())
        };
        if let Some(otlp) = &self.otlp {
            url("stream.otlp.endpoint", &otlp.endpoint, &otlp.endpoint_env)?;
            var("stream.otlp.endpoint_env", &otlp.endpoint_env)?;
            var("stream.otlp.headers_env", &otlp.headers_env)?;
        }
        if let Some(ocsf) = &self.ocsf {
            url("stream.ocsf.url", &ocsf.url, &ocsf.url_env)?;
            var("stream.ocsf.url_env", &ocsf.url_env)?;
            var("stream.ocsf.secret_env", &ocsf.secret_env)?;
        }
        if let Some(batch) = self.batch {
            if batch == 0 || batch > MAX_STREAM_BATCH {
                return Err(invalid("stream.batch", "expected 1 to 1000 rows"));
            }
        }
        for (field, value) in [
            ("stream.poll", self.poll),
            ("stream.lease", self.lease),
            ("stream.max_backoff", self.max_backoff),
            ("stream.timeout", self.timeout),
        ] {
            if value == Some(Duration::ZERO) {
                return Err(invalid(field, "must be longer than 0s"));
            }
        }
        Ok(())
    }
}

/// Whether an `http://` or `https://` URL carries userinfo; an error for anything else.
fn has_userinfo(text: &str) -> Result<bool, &'static str> {
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .ok_or("not an http:// or https:// URL")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        return Err("the URL names no host");
    }
    Ok(authority.contains('@'))
}

#[cfg(test)]
mod tests {
    use super::has_userinfo;

    #[test]
    fn userinfo_in_a_url_is_found() {
        assert_eq!(has_userinfo("http://127.0.0.1:4318"), Ok(false));
        assert_eq!(has_userinfo("https://u:p@siem.example/in"), Ok(true));
        assert_eq!(has_userinfo("https://siem.example/a@b"), Ok(false));
        assert!(has_userinfo("ftp://x").is_err());
        assert!(has_userinfo("http:///x").is_err());
    }
}
