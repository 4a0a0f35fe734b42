//! `attest mcp-server`: Attest itself as MCP tools, so an agent can consult it.
//!
//! Six tools, each annotated for what it does:
//!
//! | tool | does | annotations |
//! |---|---|---|
//! | `attest_decide` | detects and decides a call; records nothing | read-only, idempotent |
//! | `attest_ask` | asks a person about a call policy holds: files the approval request, tells the notifiers, records the ask | not read-only, not destructive, not idempotent (each call files a request) |
//! | `attest_confirm_status` | says whether a held call was answered | read-only, idempotent |
//! | `attest_record` | records an action that already happened (with the `attest_ask` token once approved), read back from its vendor where a recipe knows it | not read-only, not destructive, not idempotent (each call appends) |
//! | `attest_verify` | checks the whole ledger | read-only, idempotent |
//! | `attest_ledger` | lists the newest rows | read-only, idempotent |
//!
//! None of them decides a held call: an agent may ask and wait
//! (`attest_confirm_status`), never approve. People decide with their own approver
//! credential (`attest confirm`, the inbox, Slack, a signed link).
//! None of the tools reaches outside this machine, so none is open-world (the vendor
//! reads behind `attest_record`'s verification are Attest's own, to the configured
//! recipes' hosts).

use std::sync::Arc;

use anyhow::Context;
use attest_core::approvals::ResumeToken;
use attest_core::{
    Attest, CallContext, FunctionCall, HttpCall, McpCall, Outcome, ProtocolCall, Receipt, Start,
};
use attest_ledger::to_hex;
use attest_policy::{Action, Decision, Verb};
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt};
use serde_json::{json, Value};

use crate::{chain, receipt_json};

/// Largest `limit` `attest_ledger` accepts.
const MAX_LEDGER_ROWS: u64 = 1000;

/// Why `attest_ask` never runs the call it asks about.
const NOT_HERE: &str = "attest_ask files a request; the agent makes the call itself";

/// Serves the six tools on this process's stdio until the client goes away; bad frames get
/// JSON-RPC errors (`crate::frames`).
pub async fn serve(
    attest: Attest,
    agent: Option<Arc<attest_core::agents::CallerAgent>>,
) -> anyhow::Result<()> {
    serve_on(attest, agent, crate::frames::stdio())
        .await
        .context("MCP handshake with the client on stdin/stdout")
}

/// Serves the six tools over `transport` (any rmcp transport: a stream pair, an in-process
/// duplex) until the client goes away.
pub async fn serve_on<T, E, A>(
    attest: Attest,
    agent: Option<Arc<attest_core::agents::CallerAgent>>,
    transport: T,
) -> anyhow::Result<()>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let server = AttestServer { attest, agent };
    let running = server.serve(transport).await?;
    let _ = running.waiting().await;
    Ok(())
}

/// The MCP server over one pipeline.
pub struct AttestServer {
    attest: Attest,
    /// With agents configured, this process's agent credential, proven again on every
    /// call (a token revoked or rotated since the start stops the next call): every
    /// call's agent (a call naming another is refused).
    agent: Option<Arc<attest_core::agents::CallerAgent>>,
}

impl ServerHandler for AttestServer {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("attest", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Attest decides, records and verifies agent actions. Call attest_decide before \
                 a consequential action; when it says ask, call attest_ask and wait for \
                 attest_confirm_status to say approved. After the action, call attest_record \
                 (with the token when it was approved), and attest_verify to check the ledger.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        // Every tool, reads of the ledger included, is this agent's call: its credential
        // must still prove it (a call that names an action proves it again as it names it).
        if let Some(agent) = &self.agent {
            if let Err(refusal) = agent.identify().await {
                return Ok(CallToolResult::error(vec![ContentBlock::text(refusal.reason)]).into());
            }
        }
        let outcome = match request.name.as_ref() {
            "attest_decide" => self.decide(&args).await,
            "attest_ask" => self.ask(&args).await,
            "attest_record" => self.record(&args).await,
            "attest_verify" => self.verify().await,
            "attest_ledger" => self.ledger(&args).await,
            "attest_confirm_status" => self.confirm_status(&args).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named `{other}`"),
                    None,
                ))
            }
        };
        Ok(match outcome {
            Ok(value) => {
                let mut result = CallToolResult::structured(value);
                result.is_error = Some(false);
                result
            }
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        }
        .into())
    }
}

impl AttestServer {
    /// The call `args` describe, as [`action_from`] makes it, named by the proven agent
    /// when there is one.
    async fn action(&self, args: &Value) -> Result<Action, String> {
        let mut action = action_from(&self.attest, args)?;
        if let Some(agent) = &self.agent {
            let identity = agent.identify().await.map_err(|refusal| refusal.reason)?;
            let label = args.get("agent").and_then(Value::as_str);
            if label.is_some_and(|label| !label.trim().eq_ignore_ascii_case(&identity.name)) {
                return Err(format!(
                    "`agent` disagrees with this server's agent credential, which names {:?}",
                    identity.name
                ));
            }
            identity.apply(&mut action);
        }
        Ok(action)
    }

    /// Core's verdict, as a governed call would get it now (a policy that fails refuses;
    /// a budget or rate window the call would cross applies).
    async fn decide(&self, args: &Value) -> Result<Value, String> {
        let action = self.action(args).await?;
        let verdict = self.attest.verdict_now(&action).await;
        Ok(verdict.report(&action))
    }

    /// Files an approval request for a call policy asks about (the notifiers are told,
    /// the ask is recorded) and answers its id and token. A call policy lets through or
    /// refuses needs no person: the verdict is answered and nothing is filed.
    async fn ask(&self, args: &Value) -> Result<Value, String> {
        let action = self.action(args).await?;
        let verdict = self.attest.verdict_now(&action).await;
        if verdict.decision != Decision::Ask {
            let mut report = verdict.report(&action);
            report["requested"] = json!(false);
            return Ok(report);
        }
        // This server's gate holds at once (it never waits, never approves), so the
        // call ends held; it is the agent that makes the call, after an approval.
        let outcome = self
            .attest
            .call(action)
            .run(|_| async { Err::<Value, _>(NOT_HERE) })
            .await
            .map_err(|err| format!("could not ask: {}", chain(&err)))?;
        match outcome {
            Outcome::Held { id, token, receipt } => {
                let mut answer = receipt_json(&receipt);
                answer["requested"] = json!(true);
                answer["id"] = json!(id);
                answer["token"] = json!(token.expose());
                answer["next"] = json!(
                    "wait until attest_confirm_status says approved, then make the call and \
                     report it with attest_record, passing this token"
                );
                Ok(answer)
            }
            other => Err(format!(
                "not held for a person: {}",
                other.why_not_run().unwrap_or_else(|| "it ran".to_owned())
            )),
        }
    }

    /// Records an action that happened: with an approved `token` as the approved call
    /// (the approver on the row, the approval used once), else as reported after the
    /// fact. Either way its result is verified as a governed call's is.
    async fn record(&self, args: &Value) -> Result<Value, String> {
        let action = self.action(args).await?;
        let result = args.get("result").filter(|r| !r.is_null()).cloned();
        let Some(token) = text_arg(args, "token")? else {
            return self.reported(action, result.as_ref(), None).await;
        };
        // The approved call, run as the pipeline runs one: its "tool" is what happened.
        let reported = result.clone().unwrap_or(Value::Null);
        let start = Start::retry(&ResumeToken::new(token), action.clone());
        let outcome = self
            .attest
            .call(start)
            .run(|_| async move { Ok::<Value, String>(reported) })
            .await
            .map_err(|err| format!("could not record: {}", chain(&err)))?;
        match outcome {
            Outcome::Ran { receipt, .. } | Outcome::Failed { receipt, .. } => {
                Ok(receipt_json(&receipt))
            }
            // It happened without an approval: recorded as reported, and said so.
            not_approved => {
                let why = not_approved.why_not_run().unwrap_or_default();
                self.reported(action, result.as_ref(), Some(why)).await
            }
        }
    }

    async fn reported(
        &self,
        action: Action,
        result: Option<&Value>,
        not_approved: Option<String>,
    ) -> Result<Value, String> {
        let receipt: Receipt = self
            .attest
            .record(action, result)
            .await
            .map_err(|err| format!("could not record: {}", chain(&err)))?;
        let mut answer = receipt_json(&receipt);
        if let Some(why) = not_approved {
            answer["warning"] = json!(format!("recorded without an approval ({why})"));
        }
        Ok(answer)
    }

    async fn confirm_status(&self, args: &Value) -> Result<Value, String> {
        let key = text_arg(args, "token")?
            .ok_or("`token` (a token or request id) is required")?
            .to_owned();
        let store = self
            .attest
            .approvals()
            .map_err(|err| format!("the approval store: {}", chain(&err)))?;
        let request = tokio::task::spawn_blocking(move || {
            if ResumeToken::looks_like_token(&key) {
                store.get_by_token(&ResumeToken::new(key))
            } else {
                store.get_by_id(&key)
            }
        })
        .await
        .map_err(|err| format!("lookup stopped: {err}"))?
        .map_err(|err| chain(&err))?;
        Ok(json!({
            "id": request.id,
            "status": request.status.as_str(),
            "approver": request.approver,
            "note": request.note,
            "consumed": request.consumed,
        }))
    }

    async fn verify(&self) -> Result<Value, String> {
        let ledger = Arc::clone(self.attest.ledger());
        let report = tokio::task::spawn_blocking(move || ledger.verify())
            .await
            .map_err(|err| format!("verification stopped: {err}"))?
            .map_err(|err| format!("could not verify: {}", chain(&err)))?;
        Ok(json!({
            "ok": report.is_intact(),
            "checked": report.checked,
            "broken_at": report.broken_at(),
            "problems": report.problems.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "notes": report.notes,
        }))
    }

    async fn ledger(&self, args: &Value) -> Result<Value, String> {
        let limit = match args.get("limit") {
            None | Some(Value::Null) => 20,
            Some(value) => value
                .as_u64()
                .filter(|n| (1..=MAX_LEDGER_ROWS).contains(n))
                .ok_or_else(|| {
                    format!("`limit` must be a whole number from 1 to {MAX_LEDGER_ROWS}")
                })?,
        };
        let ledger = Arc::clone(self.attest.ledger());
        let rows = tokio::task::spawn_blocking(move || ledger.list(limit as usize))
            .await
            .map_err(|err| format!("listing stopped: {err}"))?
            .map_err(|err| format!("could not list: {}", chain(&err)))?;
        let rows: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "seq": r.seq, "ts": r.ts, "system": r.system, "verb": r.verb,
                    "agent": r.agent, "decision": r.decision, "level": r.level,
                    "hash": to_hex(&r.hash),
                })
            })
            .collect();
        Ok(json!({ "rows": rows }))
    }
}

fn text_arg<'a>(args: &'a Value, field: &str) -> Result<Option<&'a str>, String> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(format!("`{field}` must be a string")),
    }
}

/// The action an `attest_decide`/`attest_record` call describes: `tool` (with `server`),
/// `method` + `url`, or `system` + `verb`; then `params`, `target`, `agent`, `actor`.
/// Core describes it as the protocol it names (an MCP tool call, an HTTP request, a
/// declared call), with this server's configured registry.
fn action_from(attest: &Attest, args: &Value) -> Result<Action, String> {
    let text = |field: &str| text_arg(args, field);
    let verb = match text("verb")? {
        Some(word) => Some(
            serde_json::from_value::<Verb>(json!(word))
                .map_err(|_| format!("`verb`: `{word}` is not one of the fifteen verbs"))?,
        ),
        None => None,
    };
    let params = match args.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params.clone(),
        Some(_) => return Err("`params` must be an object".to_owned()),
    };
    let context = CallContext {
        agent: text("agent")?,
        actor: text("actor")?,
        target: text("target")?,
        run: None,
    };
    let body = serde_json::to_vec(&params).map_err(|err| err.to_string())?;
    let call = match (
        text("tool")?,
        text("method")?,
        text("url")?,
        text("system")?,
        verb,
    ) {
        (Some(tool), ..) => ProtocolCall::Mcp(McpCall {
            server: text("server")?.unwrap_or_default(),
            tool,
            arguments: params,
            context,
            ..McpCall::default()
        }),
        (None, Some(method), Some(url), ..) => ProtocolCall::Http(HttpCall {
            method,
            url,
            headers: vec![("content-type", b"application/json".as_slice())],
            body: &body,
            context,
        }),
        (None, _, _, Some(system), Some(verb)) => ProtocolCall::Function(FunctionCall {
            system: Some(system),
            verb: Some(verb),
            arguments: params,
            context,
            ..FunctionCall::default()
        }),
        _ => return Err(
            "describe the call with `tool`, with `method` and `url`, or with `system` and `verb`"
                .to_owned(),
        ),
    };
    Ok(attest.action(call))
}

struct Hints {
    read_only: bool,
    destructive: bool,
    idempotent: bool,
}

fn tool(name: &'static str, description: &'static str, schema: Value, hints: Hints) -> Tool {
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    let mut annotations = ToolAnnotations::new();
    annotations.read_only_hint = Some(hints.read_only);
    annotations.destructive_hint = Some(hints.destructive);
    annotations.idempotent_hint = Some(hints.idempotent);
    annotations.open_world_hint = Some(false);
    Tool::new(name, description, Arc::new(schema)).with_annotations(annotations)
}

/// The six tools, with their input schemas and honest annotations.
pub fn tools() -> Vec<Tool> {
    let call = json!({
        "tool": {"type": "string", "description": "an MCP or agent tool name, e.g. send_email"},
        "server": {"type": "string", "description": "the MCP server the tool belongs to"},
        "method": {"type": "string", "description": "an HTTP method, with url"},
        "url": {"type": "string", "description": "an HTTP URL, with method"},
        "system": {"type": "string", "description": "the system, with verb"},
        "verb": {"type": "string", "description": "read search get list create update delete send reply share upload pay approve execute write"},
        "params": {"type": "object", "description": "the call's arguments"},
        "target": {"type": "string", "description": "what it acts on (an address, an id)"},
        "agent": {"type": "string"},
        "actor": {"type": "string", "description": "the person the agent acts for"},
    });
    let mut record = call.clone();
    if let Some(map) = record.as_object_mut() {
        map.insert(
            "result".to_owned(),
            json!({"description": "what the action returned (hashed, never stored; read back from its vendor where a recipe knows the action)"}),
        );
        map.insert(
            "token".to_owned(),
            json!({"type": "string", "description": "the token attest_ask returned, once attest_confirm_status says approved"}),
        );
    }
    vec![
        tool(
            "attest_decide",
            "Detect and decide a tool call before making it: act, ask or refuse, with the reasons. Records nothing.",
            json!({"type": "object", "properties": call}),
            Hints { read_only: true, destructive: false, idempotent: true },
        ),
        tool(
            "attest_ask",
            "Ask a person about a call attest_decide answered `ask` for: files an approval request, tells the configured notifiers, records the ask, and returns its id and token. A call policy lets through or refuses files nothing.",
            json!({"type": "object", "properties": call}),
            Hints { read_only: false, destructive: false, idempotent: false },
        ),
        tool(
            "attest_confirm_status",
            "Whether a held call has been approved, rejected, or is still waiting.",
            json!({"type": "object", "properties": {"token": {"type": "string"}}, "required": ["token"]}),
            Hints { read_only: true, destructive: false, idempotent: true },
        ),
        tool(
            "attest_record",
            "Record an action that already happened: with `token`, the call a person approved through attest_ask (the approver named on its row); without, one made outside Attest (decision `recorded`). The result is read back from its vendor where a recipe knows the action. Appends one ledger row per call.",
            json!({"type": "object", "properties": record}),
            Hints { read_only: false, destructive: false, idempotent: false },
        ),
        tool(
            "attest_verify",
            "Check the whole ledger: seq order, hash chain, bodies, Merkle tree, checkpoints.",
            json!({"type": "object", "properties": {}}),
            Hints { read_only: true, destructive: false, idempotent: true },
        ),
        tool(
            "attest_ledger",
            "List the newest ledger rows.",
            json!({"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": MAX_LEDGER_ROWS}}}),
            Hints { read_only: true, destructive: false, idempotent: true },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use attest_ledger::{Ledger, LedgerOptions};
    use attest_policy::PolicyEngine;

    use super::*;

    /// The server over a pipeline with `policy` (YAML) on a fresh ledger in `dir`.
    fn server(dir: &tempfile::TempDir, policy: &str) -> AttestServer {
        let ledger = Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap();
        let policy = PolicyEngine::from_yaml(policy, "attest.yaml").unwrap();
        let attest = Attest::builder()
            .ledger(ledger)
            .policy(policy)
            .agent("bot")
            .build()
            .unwrap();
        AttestServer {
            attest,
            agent: None,
        }
    }

    #[tokio::test]
    async fn a_recorded_call_counts_in_its_window_and_decide_reads_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let rate = "policies:\n  - name: update-rate\n    match: {system: crm, verb: update}\n    limit: {count: 1, per: 1h, by: [agent]}\n  - name: updates\n    match: {system: crm}\n    decision: act\n";
        let server = server(&dir, rate);
        let update = json!({"system": "crm", "verb": "update"});
        let report = server.decide(&update).await.unwrap();
        assert_eq!(report["decision"], "act", "{report}");
        server.record(&update).await.unwrap();
        let report = server.decide(&update).await.unwrap();
        assert_eq!(report["decision"], "ask", "{report}");
        assert_eq!(
            report["reasons"][0],
            "agent bot made 1 of 1 calls allowed in 1h; this call would be call 2",
            "{report}"
        );
    }

    #[tokio::test]
    async fn decide_is_the_verdict_a_governed_call_gets_and_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let server = server(&dir, "org:\n  blocked: [\"crm.list\"]\n");
        // An organisation `blocked` rule refuses even a read, as it does for a governed call.
        let report = server
            .decide(&json!({"system": "crm", "verb": "list"}))
            .await
            .unwrap();
        assert_eq!(report["decision"], "refuse", "{report}");
        let report = server
            .decide(&json!({"system": "crm", "verb": "get"}))
            .await
            .unwrap();
        assert_eq!(report["decision"], "act", "{report}");
        assert!(server.attest.ledger().list(10).unwrap().is_empty());
    }

    /// The server over a pipeline that files approval requests (the default policy, a
    /// store gate) on a fresh ledger in `dir`, for `identity` when given.
    fn asking_server(
        dir: &tempfile::TempDir,
    ) -> (AttestServer, Arc<attest_core::approvals::ApprovalStore>) {
        use attest_core::approvals::{ApprovalStore, StoreGate};
        let ledger =
            Arc::new(Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap());
        let store = Arc::new(ApprovalStore::open(&ledger).unwrap());
        let attest = Attest::builder()
            .ledger(Arc::clone(&ledger))
            .policy(PolicyEngine::from_yaml("{}\n", "attest.yaml").unwrap())
            .approvals(Arc::clone(&store))
            .gate(StoreGate::new(Arc::clone(&store)))
            .build()
            .unwrap();
        (
            AttestServer {
                attest,
                agent: None,
            },
            store,
        )
    }

    /// A call policy asks about, made without waiting for the person: asking files one
    /// request; recording it with the token before anyone decided records what happened,
    /// says it ran without an approval, and leaves the request pending.
    #[tokio::test]
    async fn a_call_recorded_before_its_approval_says_so() {
        use attest_core::approvals::Status;
        let dir = tempfile::tempdir().unwrap();
        let (server, store) = asking_server(&dir);
        let call = json!({"system": "stripe", "verb": "pay", "params": {"amount": 5}});
        // Nothing to ask about a read: nothing is filed.
        let read = server
            .ask(&json!({"system": "stripe", "verb": "get"}))
            .await
            .unwrap();
        assert_eq!(read["requested"], false, "{read}");
        let asked = server.ask(&call).await.unwrap();
        assert_eq!(asked["requested"], true, "{asked}");
        let token = asked["token"].as_str().unwrap().to_owned();
        let mut recorded = call.clone();
        recorded["token"] = json!(token);
        recorded["result"] = json!({"id": "pi_1", "status": "succeeded"});
        let answer = server.record(&recorded).await.unwrap();
        assert_eq!(answer["decision"], "recorded", "{answer}");
        assert!(
            answer["warning"]
                .as_str()
                .unwrap()
                .contains("without an approval"),
            "{answer}"
        );
        let request = store.get_by_token(&ResumeToken::new(token)).unwrap();
        assert_eq!(request.status, Status::Pending);
        assert_eq!(store.pending().unwrap().len(), 1);
    }

    #[test]
    fn six_tools_with_honest_annotations_and_none_decides() {
        let tools = tools();
        let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(
            names,
            [
                "attest_decide",
                "attest_ask",
                "attest_confirm_status",
                "attest_record",
                "attest_verify",
                "attest_ledger"
            ]
        );
        for tool in &tools {
            let hints = tool.annotations.as_ref().unwrap();
            let writes = ["attest_record", "attest_ask"].contains(&tool.name.as_ref());
            assert_eq!(hints.read_only_hint, Some(!writes), "{}", tool.name);
            assert_eq!(hints.destructive_hint, Some(false));
            assert_eq!(hints.open_world_hint, Some(false));
        }
    }

    #[test]
    fn actions_from_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let attest = &server(&dir, "{}\n").attest;
        let action = action_from(
            attest,
            &json!({"tool": "send_email", "params": {"to": "a@b.c"}}),
        )
        .unwrap();
        assert_eq!(action.verb, Verb::Send);
        let action = action_from(attest, &json!({"system": "crm", "verb": "update"})).unwrap();
        assert_eq!((action.system.as_str(), action.verb), ("crm", Verb::Update));
        let action = action_from(
            attest,
            &json!({"method": "DELETE", "url": "https://api.github.com/repos/a/b", "agent": "bot-2"}),
        )
        .unwrap();
        assert_eq!(action.verb, Verb::Delete);
        assert_eq!(action.agent.as_deref(), Some("bot-2"));
        assert!(action_from(attest, &json!({}))
            .unwrap_err()
            .contains("describe the call"));
        assert!(action_from(attest, &json!({"system": "x", "verb": "frob"}))
            .unwrap_err()
            .contains("frob"));
        assert!(action_from(attest, &json!({"tool": 3}))
            .unwrap_err()
            .contains("`tool`"));
        assert!(action_from(attest, &json!({"tool": "x", "params": []}))
            .unwrap_err()
            .contains("params"));
    }

    #[tokio::test]
    async fn with_a_proven_agent_every_call_is_its_own_and_another_name_is_refused() {
        use attest_core::agents::{AgentAuth, CallerAgent};
        let dir = tempfile::tempdir().unwrap();
        let (mut server, store) = asking_server(&dir);
        let (_, token) = store.add_agent("billing-bot").unwrap();
        let auth = AgentAuth::new(
            &server.attest,
            &attest_core::config::AgentSettings::default(),
        )
        .await
        .unwrap();
        let credential = Some(token.expose().to_owned());
        server.agent = Some(Arc::new(CallerAgent::new(auth, credential, None)));
        let ledger = Arc::clone(server.attest.ledger());
        let pay = json!({"system": "stripe", "verb": "pay", "params": {"amount": 5}});
        let mut posing = pay.clone();
        posing["agent"] = json!("ops-bot");
        let refused = server.ask(&posing).await.unwrap_err();
        assert!(refused.contains("disagrees"), "{refused}");
        let mut own = pay.clone();
        own["agent"] = json!("Billing-Bot");
        let asked = server.ask(&own).await.unwrap();
        assert_eq!(asked["requested"], true, "{asked}");
        let mut jsonl = Vec::new();
        ledger.export_jsonl(&mut jsonl).unwrap();
        let rows: Vec<Value> = String::from_utf8(jsonl)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0]["agent"], "billing-bot");
        assert_eq!(rows[0]["agent_auth"], "token");
        // Revoked while the server runs: the next call names nobody.
        store.revoke_agent("billing-bot").unwrap();
        let refused = server.ask(&own).await.unwrap_err();
        assert!(refused.contains("not a valid agent token"), "{refused}");
    }
}
