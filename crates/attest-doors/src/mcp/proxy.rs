//! `attest mcp-proxy`: any MCP server, behind the pipeline.
//!
//! The agent's client talks MCP to this process over stdio; this process starts the
//! upstream server as a child and talks MCP to it over the child's stdio (both with the
//! official SDK, `rmcp`). Every message passes through unchanged — initialize, listings,
//! resources, prompts, completions, logging, notifications, progress (its tokens mapped
//! across the two links), `subscriptions/listen` (the subscription's id in its
//! notifications and answer mapped likewise), cancellation, and the server's own
//! requests to the client —
//! except `tools/call`, which goes through [`Attest::call`]:
//!
//! - the action is detected from the tool name, with `--server` as the system hint, and
//!   then from the upstream's tool annotations (attest-core's `apply_hints`);
//! - a refusal or a rejection becomes an `isError` result that says why, and the upstream
//!   is never called;
//! - the upstream's result comes back unchanged except for an `_attest` receipt
//!   (`seq`, `action_id`, `decision`, `level`, `entry_hash`) in its `_meta`;
//! - an upstream error, `isError` result or crash is recorded as a failed execution and
//!   reported to the client; requests to a dead upstream fail at once, never hang;
//! - a call held for a person (`ask` in `pending` mode, or unanswered within `--timeout`
//!   in `block` mode) comes back with its resume token; once approved, the added
//!   `attest_resume` tool runs it;
//! - a write is read back by attest-core: the system's recipe through the vendor's API,
//!   else through the upstream's `get_X`/`fetch_X`/`read_X` when one takes a single id
//!   ([`McpPair`], over this session's `UpstreamTools`).
//!
//! The client's frames are read by `crate::frames`: one JSON-RPC message a line, capped
//! at 16 MiB; a frame that is not UTF-8, not JSON, not a message or too long gets a
//! JSON-RPC error (`id` null, or the request's id) and the session goes on.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context;
use attest_core::approvals::ResumeToken;
use attest_core::detect::ToolHints;
use attest_core::verification::{ListedTool, McpPair, ToolCaller};
use attest_core::{
    Attest, AttestError, CallContext, CustomCheck, McpCall, Outcome, ProtocolCall, Receipt,
    ToolError,
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientConfig, ClientNotification, ClientRequest, ClientResult,
    ContentBlock, ErrorData, GetExtensions, GetMeta, InitializeResult, JsonObject, MetaObject,
    NotificationMetaObject, ProgressToken, ProtocolVersion, RequestId, ServerCapabilities,
    ServerConfig, ServerNotification, ServerRequest, ServerResult, Tool, ToolAnnotations,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient, RoleServer,
    RunningService, Service, ServiceError, ServiceExt,
};
use serde_json::{json, Map, Value};
use tokio::sync::OnceCell;

use super::http_streams::{take_mark, StreamKey};
use super::keys;
use super::order::{InFlight, Ticket};
use super::resource::Authenticated;
use super::streams::Destination;
use super::transport::{connect, request_bearer, UpstreamSpec};
use crate::{chain, held_json, not_recorded_text, receipt_json, Mode};

/// The tool added in pending mode to resume a held call.
pub const RESUME_TOOL: &str = "attest_resume";

/// What `attest mcp-proxy` was asked to do.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// The server's name: the system when the user named it (`--server`), else (guessed
    /// from the command) a hint for detection.
    pub server: String,
    /// Whether the user named the server, which makes it the system.
    pub server_named: bool,
    /// How `ask` is answered.
    pub mode: Mode,
    /// The upstream: a command, or a remote server's URL.
    pub upstream: UpstreamSpec,
    /// Whether a `--listen` client's own bearer token goes to a `--url` upstream (not when
    /// `--listen` is a protected resource: that token was issued for the proxy).
    pub pass_bearer: bool,
    /// On stdio with agents configured, this process's agent credential, checked on
    /// every call (on `--listen` each request's own credential names it instead).
    pub agent: Option<Arc<attest_core::agents::CallerAgent>>,
}

/// Serves MCP on this process's stdio until the client goes away, then stops the upstream.
pub async fn serve(attest: Attest, options: ProxyOptions) -> anyhow::Result<()> {
    options.upstream.validate()?;
    let proxy = Proxy::new(attest, options);
    let running = proxy
        .clone()
        .serve(crate::frames::stdio())
        .await
        .context("MCP handshake with the client on stdin/stdout")?;
    let _ = running.waiting().await;
    proxy.shutdown().await;
    Ok(())
}

#[derive(Clone)]
pub(crate) struct Proxy(Arc<Inner>);

impl Proxy {
    /// A proxy for one client session; its upstream starts on the client's `initialize`.
    pub(crate) fn new(attest: Attest, options: ProxyOptions) -> Proxy {
        Proxy(Arc::new(Inner {
            attest,
            options,
            bearer: std::sync::OnceLock::new(),
            upstream: OnceCell::new(),
            tools: Arc::new(Mutex::new(HashMap::new())),
            progress: Arc::default(),
            requests: Arc::default(),
            filing: Arc::default(),
            in_flight: InFlight::default(),
        }))
    }
}

struct Inner {
    attest: Attest,
    options: ProxyOptions,
    /// The bearer token of a client that came over streamable HTTP (never recorded).
    bearer: std::sync::OnceLock<String>,
    upstream: OnceCell<Upstream>,
    /// The upstream's tools by name, from its latest listing.
    tools: Arc<Mutex<HashMap<String, Tool>>>,
    /// Progress tokens: the one sent upstream → the client's own.
    progress: Routes<ProgressToken>,
    /// Requests in flight: the id on the upstream link → the client's own.
    requests: Routes<RequestId>,
    /// Held (written) while a request goes upstream and its routes are filed.
    filing: Filing,
    /// The upstream's notifications read and not yet passed on ([`super::order`]).
    in_flight: InFlight,
}

struct Upstream {
    peer: Peer<RoleClient>,
    info: InitializeResult,
    running: tokio::sync::Mutex<Option<RunningService<RoleClient, UpstreamClient>>>,
}

/// Locks a mutex, recovering the data if a holder panicked (the maps stay usable).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Proxy {
    /// The upstream, started on first use with the client's own `initialize` params
    /// (so the upstream sees the client's capabilities, not the proxy's).
    async fn upstream(
        &self,
        client: Option<ClientConfig>,
        downstream: &Peer<RoleServer>,
    ) -> Result<&Upstream, ErrorData> {
        self.0
            .upstream
            .get_or_try_init(|| self.start_upstream(client.unwrap_or_default(), downstream.clone()))
            .await
    }

    async fn start_upstream(
        &self,
        client: ClientConfig,
        downstream: Peer<RoleServer>,
    ) -> Result<Upstream, ErrorData> {
        let key = StreamKey::random();
        let service = UpstreamClient {
            downstream,
            config: client,
            tools: Arc::clone(&self.0.tools),
            progress: Arc::clone(&self.0.progress),
            requests: Arc::clone(&self.0.requests),
            filing: Arc::clone(&self.0.filing),
            posted: matches!(self.0.options.upstream, UpstreamSpec::Url { .. })
                .then(|| key.clone()),
            in_flight: self.0.in_flight.clone(),
        };
        let bearer = self.0.bearer.get().cloned();
        let in_flight = self.0.in_flight.clone();
        let running = connect(&self.0.options.upstream, service, bearer, in_flight, &key).await?;
        let peer = running.peer().clone();
        let info = peer
            .peer_info()
            .and_then(|info| initialize_result(&info))
            .unwrap_or_else(|| InitializeResult::new(ServerCapabilities::default()));
        Ok(Upstream {
            peer,
            info,
            running: tokio::sync::Mutex::new(Some(running)),
        })
    }

    async fn shutdown(&self) {
        if let Some(upstream) = self.0.upstream.get() {
            if let Some(mut running) = upstream.running.lock().await.take() {
                let _ = running.close_with_timeout(Duration::from_secs(5)).await;
            }
        }
    }

    /// Sends `request` upstream with the client's `_meta`, maps progress back, and
    /// forwards a client's cancellation. The answer is returned once the notifications
    /// the upstream sent before it have been passed on.
    async fn send_upstream(
        &self,
        peer: &Peer<RoleClient>,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ServiceError> {
        let options = PeerRequestOptions::no_options().with_meta(context.meta.clone());
        let listen = matches!(request, ClientRequest::SubscriptionsListenRequest(_));
        // rmcp names the upstream request id and progress token as it sends, so the
        // routes can only be filed after; a notification the upstream sends about the
        // request before they are filed waits for them (`UpstreamClient::handle_notification`)
        // instead of finding no route and being dropped.
        let (handle, _request, _progress) = {
            let _filing = self.0.filing.write().await;
            let handle = peer.send_request_with_option(request, options).await?;
            let request = Route::new(&self.0.requests, handle.id.clone(), context.id.clone());
            let progress = context
                .meta
                .get_progress_token()
                .map(|theirs| Route::new(&self.0.progress, handle.progress_token.clone(), theirs));
            (handle, request, progress)
        };
        let id = handle.id.clone();
        tokio::select! {
            result = handle.await_response() => {
                self.0.in_flight.settled().await;
                match result {
                    Ok(answer) if listen => Ok(subscription_renamed(answer, &id, &context.id)),
                    other => other,
                }
            }
            () = context.ct.cancelled() => {
                let reason = "cancelled by the client".to_owned();
                let cancel = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(id),
                    Some(reason.clone()),
                ));
                let _ = peer.send_notification(cancel.into()).await;
                Err(ServiceError::Cancelled { reason: Some(reason) })
            }
        }
    }

    async fn forward(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let upstream = self.upstream(None, &context.peer).await?;
        self.send_upstream(&upstream.peer, request, &context)
            .await
            .map_err(|err| self.upstream_error(err))
    }

    fn upstream_error(&self, err: ServiceError) -> ErrorData {
        match err {
            ServiceError::McpError(err) => err,
            ServiceError::TransportClosed => ErrorData::internal_error(
                format!(
                    "the upstream MCP server `{}` is not running (it exited or closed its stdio)",
                    self.0.options.server
                ),
                None,
            ),
            other => ErrorData::internal_error(
                format!("upstream `{}`: {}", self.0.options.server, chain(&other)),
                None,
            ),
        }
    }

    async fn list_tools(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let mut result = self.forward(request, context).await?;
        if let ServerResult::ListToolsResult(list) = &mut result {
            let mut tools = lock(&self.0.tools);
            for tool in &list.tools {
                tools.insert(tool.name.to_string(), tool.clone());
            }
            drop(tools);
            if self.0.options.mode != Mode::Auto && list.next_cursor.is_none() {
                list.tools.push(resume_tool());
            }
        }
        Ok(result)
    }

    /// The upstream's description of `name`, listing its tools once if it is not known.
    async fn tool(&self, peer: &Peer<RoleClient>, name: &str) -> Option<Tool> {
        if let Some(tool) = lock(&self.0.tools).get(name) {
            return Some(tool.clone());
        }
        let listed = peer.list_all_tools().await.ok()?;
        let mut tools = lock(&self.0.tools);
        for tool in listed {
            tools.insert(tool.name.to_string(), tool);
        }
        tools.get(name).cloned()
    }

    async fn call_tool(
        &self,
        call: CallToolRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let name = call.params.name.to_string();
        // On stdio, this process's agent credential proves its agent again for each call:
        // a token revoked or rotated since the start (or an expired JWT) stops this one.
        let proven = match &self.0.options.agent {
            Some(agent) => match agent.identify().await {
                Ok(identity) => Some(Authenticated::from(identity)),
                Err(refusal) => return self.answer(&name, Err(refusal.into())),
            },
            None => None,
        };
        if name == RESUME_TOOL && self.0.options.mode != Mode::Auto {
            return self.resume(call, context).await;
        }
        let upstream = self.upstream(None, &context.peer).await?;
        let peer = &upstream.peer;
        let tool = self.tool(peer, &name).await;
        let args = Value::Object(call.params.arguments.clone().unwrap_or_default());
        let options = &self.0.options;
        // The agent a `--listen` protected resource or agent credential authenticated, the
        // agent this stdio process proved, else whatever names one.
        let who = authenticated(&context).or(proven);
        let mut action = self.0.attest.action(ProtocolCall::Mcp(McpCall {
            server: &options.server,
            server_named: options.server_named,
            tool: &name,
            arguments: args,
            annotations: tool
                .as_ref()
                .and_then(|tool| tool.annotations.as_ref())
                .map(hints)
                .unwrap_or_default(),
            meta: Some(&*context.meta),
            context: CallContext {
                agent: who.as_ref().map(|who| who.subject.as_str()),
                ..CallContext::default()
            },
        }));
        if let Some(who) = &who {
            action.extra.agent_auth = Some(who.how.to_owned());
            action.extra.agent_owner.clone_from(&who.owner);
        }
        let key = match keys::key_of(&context.meta) {
            Ok(key) => key,
            Err(err) => return self.answer(&name, Err(err.into())),
        };
        let check = self.pair_check(&name, peer);
        let started = AtomicBool::new(false);
        let execute = |_params: Value| {
            started.store(true, Ordering::SeqCst);
            self.execute(peer, call, &context)
        };
        let attest = &self.0.attest;
        let mut run = std::pin::pin!(async {
            let mut governed = attest.call(action);
            if let Some(check) = &check {
                governed = governed.check(check);
            }
            if let Some(key) = key {
                governed = governed.idempotency_key(key);
                // A `--listen` client's `Authorization`, which its key is bound to when
                // no agent is authenticated (stdio carries none).
                if let Some(credential) = keys::credential_of(&context) {
                    governed = governed.credential(credential);
                }
            }
            governed.run_keeping(execute, kept_result).await
        });
        let outcome = tokio::select! {
            outcome = &mut run => outcome,
            () = context.ct.cancelled() => {
                // Still deciding (a person may be asked): stop; a waiting request is marked
                // cancelled as the gate is dropped. Once the tool runs, its own cancellation
                // path records the outcome, so the call is seen through.
                if !started.load(Ordering::SeqCst) {
                    return Err(ErrorData::internal_error(
                        "cancelled by the client before the call ran",
                        None,
                    ));
                }
                run.await
            }
        };
        self.answer(&name, outcome)
    }

    /// Runs a held call once a person approved it: `attest_resume {"token": …}`.
    async fn resume(
        &self,
        call: CallToolRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let token = call
            .params
            .arguments
            .as_ref()
            .and_then(|args| args.get("token"))
            .and_then(Value::as_str)
            .map(ResumeToken::new)
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("{RESUME_TOOL}: `token` (a string) is required"),
                    None,
                )
            })?;
        let attest = &self.0.attest;
        let store = attest.approvals().map_err(|err| {
            ErrorData::internal_error(format!("{RESUME_TOOL}: {}", chain(&err)), None)
        })?;
        let lookup = token.clone();
        let request = tokio::task::spawn_blocking(move || store.get_by_token(&lookup))
            .await
            .map_err(|err| ErrorData::internal_error(format!("{RESUME_TOOL}: {err}"), None))?;
        let request = match request {
            Ok(request) => request,
            Err(err) => {
                let text = format!("{RESUME_TOOL}: {}", chain(&err));
                return Ok(ServerResult::CallToolResult(error_result(text, None)));
            }
        };
        let Some(name) = request.action.extra.tool_name.clone() else {
            let text = format!("{RESUME_TOOL}: the held request is not an MCP tool call");
            return Ok(ServerResult::CallToolResult(error_result(text, None)));
        };
        // An approval is for the call as asked, on the server it was asked for.
        let server = &self.0.options.server;
        if request.action.extra.server.as_deref() != Some(server.as_str()) {
            let text = format!(
                "{RESUME_TOOL}: the held call was approved for server `{}`, not `{server}`; \
                 it does not run here",
                request.action.extra.server.as_deref().unwrap_or("-")
            );
            return Ok(ServerResult::CallToolResult(error_result(text, None)));
        }
        let upstream = self.upstream(None, &context.peer).await?;
        let peer = &upstream.peer;
        let check = self.pair_check(&name, peer);
        let execute = |params: Value| {
            let arguments = match params {
                Value::Object(map) => map,
                _ => JsonObject::new(),
            };
            let call = CallToolRequest::new(
                CallToolRequestParams::new(name.clone()).with_arguments(arguments),
            );
            self.execute(peer, call, &context)
        };
        let mut governed = attest.call(&token);
        if let Some(check) = &check {
            governed = governed.check(check);
        }
        let outcome = governed.run(execute).await;
        self.answer(&name, outcome)
    }

    fn pair_check(&self, name: &str, peer: &Peer<RoleClient>) -> Option<CustomCheck> {
        let tools = lock(&self.0.tools);
        let listed = tools.values().map(|tool| ListedTool {
            name: &tool.name,
            required: tool.input_schema.get("required"),
        });
        let caller = Arc::new(UpstreamTools(peer.clone()));
        McpPair::find(name, listed, caller).map(McpPair::into_check)
    }

    /// Calls the upstream tool: the tool of a governed call.
    async fn execute(
        &self,
        peer: &Peer<RoleClient>,
        call: CallToolRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<Answered, Unanswered> {
        match self
            .send_upstream(peer, ClientRequest::CallToolRequest(call), context)
            .await
        {
            Ok(result) if is_error(&result) => Err(Unanswered::ErrorResult(Box::new(result))),
            Ok(result) => Ok(Answered(result)),
            Err(err) => Err(Unanswered::Service(err)),
        }
    }

    /// What the client gets for a governed call: the one mapping of a call's outcome to
    /// MCP.
    fn answer(
        &self,
        name: &str,
        outcome: Result<Outcome<Answered, Unanswered>, AttestError>,
    ) -> Result<ServerResult, ErrorData> {
        let refusal = |text: String, receipt: &Receipt| {
            Ok(ServerResult::CallToolResult(error_result(
                text,
                Some(receipt),
            )))
        };
        match outcome {
            Ok(Outcome::Ran { output, receipt }) => Ok(with_receipt(output.0, &receipt)),
            Ok(Outcome::Refused { receipt }) => refusal(
                format!(
                    "Attest refused this call, so `{name}` was not called: {}",
                    receipt.reasons.join("; ")
                ),
                &receipt,
            ),
            Ok(Outcome::Rejected { approver, receipt }) => refusal(
                format!(
                    "Attest did not allow this call, so `{name}` was not called: rejected by {approver} (policy: {})",
                    receipt.reasons.join("; ")
                ),
                &receipt,
            ),
            Ok(Outcome::Expired { receipt, .. }) => refusal(
                format!("`{name}` was not called: its approval request expired before anyone decided"),
                &receipt,
            ),
            Ok(Outcome::Held { id, token, receipt }) => {
                let text = format!(
                    "Attest is holding `{name}` for a person's approval, so it has not run yet ({}). \
                     A registered approver decides (request {id}); you cannot. Once they have, \
                     call {RESUME_TOOL} with {{\"token\": \"{}\"}}.",
                    receipt.reasons.join("; "),
                    token.expose()
                );
                let mut result = error_result(text, Some(&receipt));
                result.structured_content = Some(held_json(&self.0.attest, &id, &token, &receipt));
                Ok(ServerResult::CallToolResult(result))
            }
            // The upstream's own error result, returned as it is, with the receipt.
            Ok(Outcome::Failed {
                error: Unanswered::ErrorResult(result),
                receipt,
            }) => Ok(with_receipt(*result, &receipt)),
            // A protocol error from the upstream: passed on, receipt in its data.
            Ok(Outcome::Failed {
                error: Unanswered::Service(ServiceError::McpError(mut err)),
                receipt,
            }) => {
                let mut data = match err.data.take() {
                    Some(Value::Object(map)) => map,
                    Some(other) => Map::from_iter([("upstream".to_owned(), other)]),
                    None => Map::new(),
                };
                data.insert("_attest".to_owned(), receipt_json(&receipt));
                err.data = Some(Value::Object(data));
                Err(err)
            }
            Ok(Outcome::Failed {
                error: Unanswered::Service(err),
                receipt,
            }) => refusal(
                format!(
                    "`{name}` failed: {} (recorded as a failed execution)",
                    self.upstream_error(err).message
                ),
                &receipt,
            ),
            // A retry of a call that ran under the same key: its result again, marked.
            Ok(Outcome::Replayed { receipt, response }) => {
                let result = keys::replayed(response.as_deref()).unwrap_or_else(|| {
                    let mut result = error_result(
                        format!(
                            "a call with this idempotency key already ran (seq {}); its result was \
                             not kept, so it cannot be replayed. `{name}` was not called again",
                            receipt.seq
                        ),
                        None,
                    );
                    keys::mark_call(&mut result);
                    ServerResult::CallToolResult(result)
                });
                Ok(with_receipt(result, &receipt))
            }
            // The key is malformed, was used for another call, or its call has not ended.
            Err(AttestError::Idempotency(err)) => Ok(ServerResult::CallToolResult(error_result(
                format!("`{name}` was not run: {err}"),
                None,
            ))),
            Ok(_) => Err(ErrorData::internal_error(
                format!("`{name}`: an outcome this proxy does not know"),
                None,
            )),
            // The approval store refused (unknown or used token, altered request): nothing ran.
            Err(AttestError::Approval(err)) => Ok(ServerResult::CallToolResult(error_result(
                format!("`{name}` was not run: {}", chain(&err)),
                None,
            ))),
            // The intent row was not accepted: the upstream tool was never called.
            Err(err @ AttestError::NotRecorded(_)) => Ok(ServerResult::CallToolResult(
                error_result(not_recorded_text(&format!("`{name}`"), &err), None),
            )),
            // The agent's credential proves nobody now: nothing ran, nothing recorded.
            Err(AttestError::Agent(refusal)) => Ok(ServerResult::CallToolResult(error_result(
                format!("`{name}` was not called: {}", refusal.reason),
                None,
            ))),
            // Not recorded (the ledger failed).
            Err(err) => Err(ErrorData::internal_error(
                format!("attest could not decide or record `{name}`: {}", chain(&err)),
                None,
            )),
        }
    }
}

/// What a retry with the same idempotency key is answered with: the upstream's result,
/// or its own error result (see [`mcp_keys`]).
fn kept_result(outcome: &Outcome<Answered, Unanswered>) -> Option<Vec<u8>> {
    match outcome {
        Outcome::Ran { output, .. } => keys::keep(&output.0),
        Outcome::Failed {
            error: Unanswered::ErrorResult(result),
            ..
        } => keys::keep(result),
        _ => None,
    }
}

/// The upstream's answer to a call, recorded as its payload ([`payload`]).
struct Answered(ServerResult);

impl serde::Serialize for Answered {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        payload(&self.0).serialize(serializer)
    }
}

/// Why a call did not return a result: the upstream's own error result (returned to
/// the client as it is), or a protocol or transport error.
enum Unanswered {
    ErrorResult(Box<ServerResult>),
    Service(ServiceError),
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::ErrorResult(_) => f.write_str("the upstream tool returned an error result"),
            Unanswered::Service(err) => f.write_str(&chain(err)),
        }
    }
}

impl Service<RoleServer> for Proxy {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        match request {
            ClientRequest::InitializeRequest(init) => {
                if let Some(token) = request_bearer(&context).filter(|_| self.0.options.pass_bearer)
                {
                    let _ = self.0.bearer.set(token);
                }
                let upstream = self.upstream(Some(init.params), &context.peer).await?;
                Ok(ServerResult::InitializeResult(upstream.info.clone()))
            }
            ClientRequest::CallToolRequest(call) => self.call_tool(call, context).await,
            request @ ClientRequest::ListToolsRequest(_) => self.list_tools(request, context).await,
            other => self.forward(other, context).await,
        }
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let mut notification = match notification {
            // The upstream got its own `initialized` from the proxy's handshake, and
            // cancellations are forwarded per request (the ids differ on each link).
            ClientNotification::InitializedNotification(_)
            | ClientNotification::CancelledNotification(_) => return Ok(()),
            other => other,
        };
        let Some(upstream) = self.0.upstream.get() else {
            return Ok(());
        };
        let meta = notification_meta(context.meta, &context.extensions);
        carry_meta(&mut notification, meta);
        upstream
            .peer
            .send_notification(notification)
            .await
            .map_err(|err| self.upstream_error(err))
    }

    fn get_info(&self) -> ServerConfig {
        match self.0.upstream.get() {
            Some(upstream) => upstream.info.clone(),
            None => InitializeResult::new(ServerCapabilities::default()),
        }
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        // Once the upstream has agreed a version, that is the only one the client may get.
        match self.0.upstream.get() {
            Some(upstream) => Cow::Owned(vec![upstream.info.protocol_version.clone()]),
            None => Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }
}

/// The proxy's side of the upstream link: the upstream's requests and notifications go
/// to the client.
struct UpstreamClient {
    downstream: Peer<RoleServer>,
    config: ClientConfig,
    tools: Arc<Mutex<HashMap<String, Tool>>>,
    progress: Routes<ProgressToken>,
    requests: Routes<RequestId>,
    filing: Filing,
    /// A remote upstream's key for the request a notification was posted for
    /// ([`super::http_streams`]); none for a stdio upstream.
    posted: Option<StreamKey>,
    in_flight: InFlight,
}

impl UpstreamClient {
    /// Where the client gets `meta`'s notification ([`super::streams`]): a
    /// subscription's on its `subscriptions/listen` (the id renamed to the client's), a
    /// remote upstream's on the stream of the request it was posted for, else its
    /// standalone stream; none said for a stdio upstream's.
    fn destination(&self, meta: &mut NotificationMetaObject) -> Option<Destination> {
        let posted = self
            .posted
            .as_ref()
            .map(|key| take_mark(&mut meta.0 .0, key));
        if let Some(subscription) = meta.subscription_id() {
            if let Some(theirs) = lock(&self.requests).get(&subscription).cloned() {
                meta.set_subscription_id(theirs.clone());
                return Some(Destination::Request(theirs));
            }
        }
        let posted = posted?;
        let theirs = posted.and_then(|ours| lock(&self.requests).get(&ours).cloned());
        Some(theirs.map_or(Destination::Standalone, Destination::Request))
    }
}

impl Service<RoleClient> for UpstreamClient {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        if let ServerRequest::PingRequest(_) = request {
            return Ok(ClientResult::empty(()));
        }
        let options = PeerRequestOptions::no_options().with_meta(context.meta);
        let handle = self
            .downstream
            .send_request_with_option(request, options)
            .await
            .map_err(client_error)?;
        handle.await_response().await.map_err(client_error)
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        // Numbered as it was read: passed on in its turn, done once passed on or dropped.
        let _forwarding = match context.extensions.get::<Ticket>() {
            Some(ticket) => Some(self.in_flight.forwarding(*ticket).await),
            None => None,
        };
        // Every request sent so far has its routes filed (held only for the look-ups).
        let filed = self.filing.read().await;
        let mut notification = match notification {
            ServerNotification::ProgressNotification(mut progress) => {
                let theirs = lock(&self.progress)
                    .get(&progress.params.progress_token)
                    .cloned();
                // Progress for a request the client did not ask progress for: dropped.
                let Some(theirs) = theirs else { return Ok(()) };
                progress.params.progress_token = theirs;
                ServerNotification::ProgressNotification(progress)
            }
            ServerNotification::CancelledNotification(_) => return Ok(()),
            ServerNotification::ToolListChangedNotification(changed) => {
                lock(&self.tools).clear();
                ServerNotification::ToolListChangedNotification(changed)
            }
            other => other,
        };
        let mut meta = notification_meta(context.meta, &context.extensions);
        let destination = self.destination(&mut meta);
        drop(filed);
        carry_meta(&mut notification, meta);
        if let Some(destination) = destination {
            notification.extensions_mut().insert(destination);
        }
        self.downstream
            .send_notification(notification)
            .await
            .map_err(client_error)
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

/// Gives a forwarded notification the `_meta` it arrived with — none when it had none.
/// The SDK leaves an empty `_meta` in the params once it has taken the metadata out, which
/// would reach the other side as `"_meta": {}` the sender never sent: it is removed.
fn carry_meta<N>(notification: &mut N, meta: N::Metadata)
where
    N: GetMeta + serde::Serialize + serde::de::DeserializeOwned,
    N::Metadata: PartialEq,
{
    if meta != N::Metadata::default() {
        *notification.get_meta_mut() = meta;
        return;
    }
    let Ok(mut value) = serde_json::to_value(&*notification) else {
        return;
    };
    let Some(params) = value.get_mut("params").and_then(Value::as_object_mut) else {
        return;
    };
    if params
        .get("_meta")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        params.remove("_meta");
        if let Ok(stripped) = serde_json::from_value(value) {
            *notification = stripped;
        }
    }
}

fn client_error(err: ServiceError) -> ErrorData {
    match err {
        ServiceError::McpError(err) => err,
        other => ErrorData::internal_error(format!("the MCP client: {}", chain(&other)), None),
    }
}

/// A `subscriptions/listen` answer with the subscription (the request) it names in its
/// `_meta` renamed from the upstream link's id to the client's.
fn subscription_renamed(
    answer: ServerResult,
    ours: &RequestId,
    theirs: &RequestId,
) -> ServerResult {
    const KEY: &str = "io.modelcontextprotocol/subscriptionId";
    let (Ok(mut value), Ok(ours), Ok(theirs)) = (
        serde_json::to_value(&answer),
        serde_json::to_value(ours),
        serde_json::to_value(theirs),
    ) else {
        return answer;
    };
    let Some(meta) = value.get_mut("_meta").and_then(Value::as_object_mut) else {
        return answer;
    };
    if meta.get(KEY) != Some(&ours) {
        return answer;
    }
    meta.insert(KEY.to_owned(), theirs);
    serde_json::from_value(value).unwrap_or(answer)
}

/// The notification's `_meta`: rmcp hands a notification's handler its metadata in the
/// context's extensions, where it parsed it, and leaves `meta` empty.
fn notification_meta(
    meta: NotificationMetaObject,
    extensions: &rmcp::model::Extensions,
) -> NotificationMetaObject {
    let mut merged = extensions
        .get::<NotificationMetaObject>()
        .cloned()
        .unwrap_or_default();
    merged.extend(meta);
    merged
}

/// An id on the upstream link (a progress token, a request id) → the client's own.
type Routes<K> = Arc<Mutex<HashMap<K, K>>>;

/// Taken to write while a request is sent upstream and its [`Routes`] filed, to read by a
/// notification before it looks a route up.
type Filing = Arc<tokio::sync::RwLock<()>>;

/// Maps an upstream id to the client's while one request is in flight.
struct Route<K: std::hash::Hash + Eq> {
    map: Routes<K>,
    ours: K,
}

impl<K: std::hash::Hash + Eq + Clone> Route<K> {
    fn new(map: &Routes<K>, ours: K, theirs: K) -> Self {
        lock(map).insert(ours.clone(), theirs);
        Route {
            map: Arc::clone(map),
            ours,
        }
    }
}

impl<K: std::hash::Hash + Eq> Drop for Route<K> {
    fn drop(&mut self) {
        lock(&self.map).remove(&self.ours);
    }
}

/// The upstream's answer to `initialize`, as the client will see it.
fn initialize_result(info: &impl serde::Serialize) -> Option<InitializeResult> {
    let mut value = serde_json::to_value(info).ok()?;
    if let Some(map) = value.as_object_mut() {
        map.entry("serverInfo").or_insert_with(
            || json!({"name": "attest-mcp-proxy", "version": env!("CARGO_PKG_VERSION")}),
        );
    }
    serde_json::from_value(value).ok()
}

/// The upstream's tool annotations as attest-core's [`ToolHints`].
fn hints(annotations: &ToolAnnotations) -> ToolHints {
    ToolHints {
        read_only: annotations.read_only_hint,
        destructive: annotations.destructive_hint,
        idempotent: annotations.idempotent_hint,
    }
}

/// The caller a `--listen` protected resource authenticated for this request.
fn authenticated(context: &RequestContext<RoleServer>) -> Option<Authenticated> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    parts.extensions.get::<Authenticated>().cloned()
}

fn is_error(result: &ServerResult) -> bool {
    matches!(result, ServerResult::CallToolResult(r) if r.is_error == Some(true))
}

/// What a tool result says, as a JSON value to hash and check: its structured content,
/// else its one text block when that is a JSON object, else the whole result.
pub fn payload(result: &ServerResult) -> Value {
    if let ServerResult::CallToolResult(result) = result {
        return call_payload(result);
    }
    serde_json::to_value(result).unwrap_or(Value::Null)
}

fn call_payload(result: &CallToolResult) -> Value {
    if let Some(structured) = &result.structured_content {
        return structured.clone();
    }
    if let [only] = result.content.as_slice() {
        if let Some(text) = only.as_text() {
            if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(&text.text) {
                return value;
            }
        }
    }
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// The upstream's result with the receipt added under `_meta._attest`.
fn with_receipt(mut result: ServerResult, receipt: &Receipt) -> ServerResult {
    if let ServerResult::CallToolResult(call) = &mut result {
        call.meta
            .get_or_insert_with(MetaObject::new)
            .0
            .insert("_attest".to_owned(), receipt_json(receipt));
    }
    result
}

fn error_result(text: impl Into<String>, receipt: Option<&Receipt>) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    if let Some(receipt) = receipt {
        let mut meta = MetaObject::new();
        meta.0.insert("_attest".to_owned(), receipt_json(receipt));
        result.meta = Some(meta);
    }
    result
}

fn resume_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {"token": {"type": "string", "description": "the token a held call returned"}},
        "required": ["token"],
    });
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    let mut hints = ToolAnnotations::new();
    hints.read_only_hint = Some(false);
    hints.destructive_hint = Some(false);
    hints.idempotent_hint = Some(true);
    hints.open_world_hint = Some(true);
    Tool::new(
        RESUME_TOOL,
        "Resume a call that Attest held for approval: runs it if a person approved it.",
        Arc::new(schema),
    )
    .with_annotations(hints)
}

/// The upstream session as attest-core's [`ToolCaller`], for the MCP pair read-back.
struct UpstreamTools(Peer<RoleClient>);

#[async_trait::async_trait]
impl ToolCaller for UpstreamTools {
    async fn call_tool(&self, name: &str, arguments: JsonObject) -> Result<Value, ToolError> {
        let request = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let read = self.0.call_tool(request).await.map_err(|err| chain(&err))?;
        if read.is_error == Some(true) {
            return Err(format!("`{name}` returned an error").into());
        }
        Ok(call_payload(&read))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_prefer_structured_then_json_text() {
        let mut result = CallToolResult::success(vec![ContentBlock::text(r#"{"id": "n1"}"#)]);
        assert_eq!(call_payload(&result), json!({"id": "n1"}));
        result.structured_content = Some(json!({"id": "n2"}));
        assert_eq!(call_payload(&result), json!({"id": "n2"}));
        let plain = CallToolResult::success(vec![ContentBlock::text("hello")]);
        assert!(call_payload(&plain).get("content").is_some());
    }

    #[test]
    fn receipts_go_in_meta() {
        let result = ServerResult::CallToolResult(CallToolResult::success(vec![]));
        let receipt = test_receipt();
        let ServerResult::CallToolResult(call) = with_receipt(result, &receipt) else {
            panic!("kind")
        };
        let meta = call.meta.unwrap();
        assert_eq!(meta.0["_attest"]["seq"], 7);
    }

    fn test_receipt() -> Receipt {
        let dir = tempfile::tempdir().unwrap();
        let ledger = attest_ledger::Ledger::open(
            dir.path().join("l.sqlite"),
            attest_ledger::LedgerOptions::default(),
        )
        .unwrap();
        let attest = Attest::builder().ledger(ledger).build().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut receipt = runtime
            .block_on(attest.record(
                attest_policy::Action::new("x", attest_policy::Verb::Read),
                None,
            ))
            .unwrap();
        receipt.seq = 7;
        receipt
    }
}
