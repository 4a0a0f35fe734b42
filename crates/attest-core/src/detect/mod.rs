//! Detection: the system, verb and target of any tool call.
//!
//! Agents call tools by MCP tool name, by HTTP method and URL, through SDK paths
//! (`hubspot.crm.deals.update`) or by plain function names (`send_email`). [`detect`] names
//! the **system**, the **verb** (one of the fifteen [`Verb`]s) and the **target** (the kind of
//! thing acted on) of each, and says whether it recognised the call. Policy and read-back are
//! only as good as this step, so an input it cannot place is `unknown`/`write` with
//! `recognised: false`, which policy treats as a high-risk write and asks about.
//!
//! What it knows is data, not code: the [`Registry`] is `policies/registry.yaml` compiled in,
//! optionally extended by a file of the user's ([`Registry::default_with`],
//! [`Registry::extend_file`]) and by exact overrides ([`Registry::register`]).
//!
//! ```
//! use attest_core::detect::{detect, DetectInput};
//! use attest_policy::Verb;
//!
//! let found = detect(&DetectInput::Tool { name: "mcp__github__create_issue", server: None });
//! assert_eq!((found.system.as_str(), found.verb), ("github", Verb::Create));
//! assert_eq!(found.target.as_deref(), Some("issue"));
//!
//! let found = detect(&DetectInput::Http {
//!     method: "POST",
//!     url: "https://api.stripe.com/v1/refunds",
//!     body: None,
//! });
//! assert_eq!((found.system.as_str(), found.verb), ("stripe", Verb::Pay));
//! ```

mod coding_tool;
mod domain;
mod error;
mod graphql;
mod hints;
mod operations;
mod protected_path;
mod written_paths;
pub(crate) use written_paths::written_paths;
mod registry;
mod request_body;
mod shell;
mod spec;
mod tokenize;
mod tool_name;
pub(crate) mod url;

use std::sync::LazyLock;

use attest_policy::{Action, Extra, Risk, Source, Verb};
use serde::Serialize;
use serde_json::Value;

pub use coding_tool::FILES_SYSTEM;
pub use error::DetectError;
pub use hints::{apply_hints, ToolHints};
pub use operations::OperationIds;
pub use registry::Registry;
pub use shell::SHELL_SYSTEM;

/// The system name given to calls detection could not place.
pub const UNKNOWN_SYSTEM: &str = "unknown";

/// One call to detect, in whichever form the agent made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DetectInput<'a> {
    /// An MCP tool name such as `slack_post_message` or `mcp__github__create_issue`.
    Tool {
        /// The tool's name as the agent called it.
        name: &'a str,
        /// The MCP server's name, a hint for the system (`github`, `@acme/server-slack`).
        server: Option<&'a str>,
    },
    /// An MCP tool on a server the user named in configuration (`attest mcp-proxy --server
    /// hr`, `--server` on the command line, a policy case's `server:`). That name is the
    /// system, whether or not the registry knows it, so an organisation's rule for its own
    /// server (`hr.*`) applies; an umbrella name (`google`) is still narrowed by the tool name.
    /// A server name taken from the tool name (`mcp__x__…`) or guessed from a command is only
    /// a hint: use [`DetectInput::Tool`] for those.
    NamedServerTool {
        /// The tool's name as the agent called it.
        name: &'a str,
        /// The server's name as the user configured it.
        server: &'a str,
    },
    /// An HTTP request, as seen by the gateway.
    Http {
        /// The method (`GET`, `post`, …).
        method: &'a str,
        /// The URL, absolute or relative.
        url: &'a str,
        /// The request body; read only for GraphQL operations.
        body: Option<&'a [u8]>,
    },
    /// An SDK call path such as `stripe.Refund.create` or `s3.delete_object`.
    Sdk {
        /// The dotted path.
        path: &'a str,
    },
    /// A plain function name such as `send_email`; the system is guessed from the name alone.
    Function {
        /// The function's name.
        name: &'a str,
    },
    /// A shell command line (`git push origin main`, `rm -rf build`), judged by its
    /// riskiest simple command; a program nobody knows is an unrecognised `shell`/`execute`.
    Shell {
        /// The command line.
        command: &'a str,
    },
    /// A coding agent's tool call (Claude Code's `Bash`, `Write`, `Edit`, `MultiEdit`,
    /// `Read`, `WebFetch`, MCP tools `mcp__server__tool`), described from its input: a
    /// command by what it does, a file write by its path.
    CodingTool {
        /// The tool's name.
        name: &'a str,
        /// The tool's input (`{"command": …}`, `{"file_path": …}`).
        input: &'a Value,
    },
    /// System and verb given by the caller; they always win.
    Manual {
        /// The system.
        system: &'a str,
        /// The verb.
        verb: Verb,
    },
}

impl DetectInput<'_> {
    /// Copies what the call was (tool name, server, method, URL) into an action's [`Extra`].
    pub fn fill_extra(&self, extra: &mut Extra) {
        match *self {
            DetectInput::Tool { name, server } => {
                extra.tool_name = Some(name.to_owned());
                extra.server = server.map(str::to_owned);
            }
            DetectInput::NamedServerTool { name, server } => {
                extra.tool_name = Some(name.to_owned());
                extra.server = Some(server.to_owned());
            }
            DetectInput::Http { method, url, .. } => {
                extra.method = Some(method.to_owned());
                extra.url = Some(url.to_owned());
            }
            DetectInput::Sdk { path: name } | DetectInput::Function { name } => {
                extra.tool_name = Some(name.to_owned());
            }
            DetectInput::CodingTool { name, input } => {
                extra.tool_name = Some(name.to_owned());
                if let Some(url) = input.get("url").and_then(Value::as_str) {
                    extra.url = Some(url.to_owned());
                }
            }
            DetectInput::Shell { .. } | DetectInput::Manual { .. } => {}
        }
    }
}

/// What detection found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Detection {
    /// The system (`gmail`, `stripe`, an unknown host's registered name, or `unknown`).
    pub system: String,
    /// What the call does.
    pub verb: Verb,
    /// The kind of thing acted on (`issue`, `pull_request`, `messages`), when the call names one.
    pub target: Option<String>,
    /// How the system and verb were found.
    pub source: Source,
    /// True when both the system and the verb came from the registry; false makes a write ask.
    pub recognised: bool,
    /// A risk tier fixed for this exact tool by the registry (`gmail_create_draft` is medium).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    /// Set where a parser gave up and the verb became the riskiest there is: the verb the
    /// call read as on its face. Policy judges both readings ([`attest_policy::Extra::face_verb`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub face_verb: Option<Verb>,
}

impl Detection {
    /// The answer for a call nothing is known about: `unknown`/`write`, not recognised.
    pub fn unrecognised(source: Source) -> Detection {
        Detection {
            face_verb: None,
            system: UNKNOWN_SYSTEM.to_owned(),
            verb: Verb::Write,
            target: None,
            source,
            recognised: false,
            risk: None,
        }
    }

    fn manual(system: &str, verb: Verb) -> Detection {
        let system = system.trim();
        Detection {
            face_verb: None,
            system: if system.is_empty() {
                UNKNOWN_SYSTEM.to_owned()
            } else {
                system.to_owned()
            },
            verb,
            target: None,
            source: Source::Manual,
            recognised: true,
            risk: None,
        }
    }

    /// The riskier of two readings of one call: the higher risk tier (an unrecognised write
    /// counts as high), then the unrecognised one; `self` on a tie. A request whose shape
    /// could hide its verb (a method override, a GraphQL batch, a path parameter) is judged
    /// by its riskiest reading.
    #[must_use]
    pub fn riskier(self, other: Detection) -> Detection {
        if other.danger() > self.danger() {
            other
        } else {
            self
        }
    }

    /// This detection's system and target with the riskiest verb there is, unrecognised:
    /// the reading of a request a parser gave up on, which asks (or refuses under a refusing
    /// rule) and never acts as an unknown write might.
    #[must_use]
    pub fn as_riskiest_verb(self) -> Detection {
        Detection {
            // The first reading a parser gave up on is the face one.
            face_verb: self.face_verb.or(Some(self.verb)),
            verb: Verb::Delete,
            recognised: false,
            risk: None,
            ..self
        }
    }

    pub(crate) fn danger(&self) -> (Risk, bool) {
        let risk = self.risk.unwrap_or(self.verb.default_risk());
        let risk = if self.recognised || self.verb.is_read() {
            risk
        } else {
            risk.max(Risk::High)
        };
        (risk, !self.recognised)
    }

    /// Writes system, verb, source and recognised into `action`. The target and risk are
    /// written only where the action has none, since a caller's own values beat detection's.
    pub fn apply_to(&self, action: &mut Action) {
        action.system.clone_from(&self.system);
        action.verb = self.verb;
        action.source = self.source;
        action.recognised = self.recognised;
        if action.target.is_none() {
            action.target.clone_from(&self.target);
        }
        if action.risk.is_none() {
            action.risk = self.risk;
        }
        action.extra.face_verb = self.face_verb;
    }

    /// A new action with this detection and the tool's params.
    pub fn into_action(self, params: Value) -> Action {
        let mut action = Action::new(self.system, self.verb).with_params(params);
        action.target = self.target;
        action.source = self.source;
        action.recognised = self.recognised;
        action.risk = self.risk;
        action.extra.face_verb = self.face_verb;
        action
    }
}

/// The action a call describes: detected with the compiled-in registry, with `params`,
/// and with the call itself (tool, server, method, URL) in its [`Extra`].
pub fn detect_action(input: &DetectInput<'_>, params: Value) -> Action {
    DEFAULT_REGISTRY.detect_action(input, params)
}

impl Registry {
    /// [`detect_action`] with this registry.
    pub fn detect_action(&self, input: &DetectInput<'_>, params: Value) -> Action {
        let mut action = self.detect(input).into_action(params);
        input.fill_extra(&mut action.extra);
        action
    }
}

static DEFAULT_REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::default_or_empty);

impl Registry {
    /// The compiled-in registry with the process's `ATTEST_BASE_URL_<SYSTEM>` hosts, or an
    /// empty one (everything `unknown`, so everything asks) if it could not be built. The
    /// tests make sure it can.
    fn default_or_empty() -> Registry {
        let mut registry = Registry::builtin().unwrap_or_default();
        registry.base_urls_from(&crate::verification::ProcessEnv);
        registry
    }

    /// The shared compiled-in registry that [`detect`] uses, built on first use; a host named
    /// by an `ATTEST_BASE_URL_<SYSTEM>` variable set then is that system's.
    pub fn shared() -> &'static Registry {
        &DEFAULT_REGISTRY
    }
}

/// Headers that ask a server to treat a request as another method (Google, Microsoft,
/// Rails, Laravel and many proxies honour one or another). Lower-case.
pub const METHOD_OVERRIDE_HEADERS: [&str; 3] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

impl Registry {
    /// Detects an HTTP request with its headers, judged by its riskiest reading: the method,
    /// each [`METHOD_OVERRIDE_HEADERS`] value, each method of a comma-listed one, and the
    /// whole list as one unknown method (one that is not text reads as an unknown method,
    /// so an unrecognised write), and `_method` or a GraphQL document in the query
    /// or in the body, read as its `Content-Encoding` and `Content-Type` say (a body that
    /// cannot be read so is judged as the riskiest verb).
    pub fn detect_http_request<'h>(
        &self,
        method: &str,
        url: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h [u8])>,
        body: Option<&[u8]>,
    ) -> Detection {
        let mut declared = request_body::Declared::default();
        let mut overrides = Vec::new();
        let mut unreadable_header = false;
        for (name, value) in headers {
            let text = std::str::from_utf8(value).ok();
            if name.eq_ignore_ascii_case("content-type") {
                unreadable_header |= text.is_none() || declared.content_type.is_some();
                declared.content_type = text;
            } else if name.eq_ignore_ascii_case("content-encoding") {
                // Two headers are one list (RFC 9110 5.3); read only as one, so give up.
                unreadable_header |= text.is_none() || declared.content_encoding.is_some();
                declared.content_encoding = text;
            } else if METHOD_OVERRIDE_HEADERS
                .iter()
                .any(|known| name.eq_ignore_ascii_case(known))
            {
                // A list (`PATCH, DELETE`) is every method it names and the whole list
                // (an unknown method): a server may take the first, the last, or neither.
                let text = text.unwrap_or("?");
                overrides.push(text);
                if text.contains(',') {
                    overrides.extend(text.split(','));
                }
            }
        }
        let mut found = url::detect_http_declared(self, method, url, declared, body);
        for method in overrides {
            found = found.riskier(url::detect_http_declared(self, method, url, declared, body));
        }
        if unreadable_header {
            found = found.as_riskiest_verb();
        }
        found
    }
}

/// Detects a call with the compiled-in registry (built once, on first use).
pub fn detect(input: &DetectInput<'_>) -> Detection {
    DEFAULT_REGISTRY.detect(input)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn manual_always_wins() {
        let found = detect(&DetectInput::Manual {
            system: "gmail",
            verb: Verb::Send,
        });
        assert_eq!(found.system, "gmail");
        assert_eq!(found.source, Source::Manual);
        assert!(found.recognised);
        let found = detect(&DetectInput::Manual {
            system: "  ",
            verb: Verb::Read,
        });
        assert_eq!(found.system, UNKNOWN_SYSTEM);
    }

    #[test]
    fn detections_fill_actions_without_beating_the_caller() {
        let found = detect(&DetectInput::Tool {
            name: "gmail_create_draft",
            server: None,
        });
        assert_eq!(found.risk, Some(Risk::Medium));
        let mut action = Action::new("x", Verb::Read).with_target("bob@example.com");
        found.apply_to(&mut action);
        assert_eq!(action.system, "gmail");
        assert_eq!(action.verb, Verb::Create);
        assert_eq!(action.target.as_deref(), Some("bob@example.com"));
        assert_eq!(action.risk, Some(Risk::Medium));
        assert_eq!(action.source, Source::Mcp);

        let action = found.clone().into_action(json!({"to": "a@b.c"}));
        assert_eq!(action.target.as_deref(), Some("draft"));
        assert_eq!(action.params["to"], "a@b.c");
    }

    #[test]
    fn detections_serialise_with_the_documented_keys() {
        let found = detect(&DetectInput::Function {
            name: "charge_card",
        });
        let value = serde_json::to_value(&found).unwrap();
        assert_eq!(
            value,
            json!({"system": "unknown", "verb": "pay", "target": "card",
                   "source": "heuristic", "recognised": false})
        );
    }

    #[test]
    fn inputs_fill_extra() {
        let mut extra = Extra::default();
        DetectInput::Tool {
            name: "create_issue",
            server: Some("github"),
        }
        .fill_extra(&mut extra);
        assert_eq!(extra.tool_name.as_deref(), Some("create_issue"));
        assert_eq!(extra.server.as_deref(), Some("github"));
        DetectInput::Http {
            method: "GET",
            url: "/x",
            body: None,
        }
        .fill_extra(&mut extra);
        assert_eq!(extra.method.as_deref(), Some("GET"));
    }
}
