//! `attest mcp-proxy --listen`: the proxy's streamable-HTTP front end.
//!
//! Clients reach the proxy at `/mcp` on a loopback address; each session is its own
//! `Proxy` (and its own upstream connection, with that client's bearer token). The SDK's
//! HTTP server (sessions, `Mcp-Session-Id`, SSE streams, `Last-Event-ID` resumption,
//! `DELETE`) wants a typed handler; `Relay` is that handler, and each of its methods
//! turns the typed request back into the [`ClientRequest`] it was and hands it to the same
//! `Proxy::handle_request` a stdio client reaches — one forwarding path, so the two
//! fronts cannot drift. Every method and notification is relayed, custom ones too, and
//! `subscriptions/listen`, which the SDK's handler would answer itself, reaches it as a
//! custom request (`super::streams`); only `tools/call` is governed.
//!
//! In front of the SDK's server, `super::sessions` binds each session to the
//! credential that opened it and hands an upstream's `401`/`403` challenge back as HTTP;
//! the SDK itself checks `Host` (DNS rebinding) and `Origin` (loopback origins on the
//! bound port, and those given with `--allow-origin`).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use attest_core::Attest;
// `logging/setLevel` and `resources/subscribe` are deprecated in the newest protocol version,
// and still what a client on an older one sends: relayed as they are.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientNotification, ClientRequest,
    CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest, CustomResult,
    ErrorData, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams, GetSkillResult,
    GetTaskParams, GetTaskResult, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, Request, RequestOptionalParam, ServerConfig, ServerResult,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, Service};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServerHandler;

use super::proxy::{Proxy, ProxyOptions};
use super::resource::{Resource, METADATA_PATH};
use super::sessions::SessionGuard;

/// Where and how `--listen` serves.
pub struct ListenOptions {
    /// The loopback address.
    pub address: SocketAddr,
    /// Browser origins allowed besides the loopback ones on the bound port.
    pub origins: Vec<String>,
    /// Who may scrape `/metrics`.
    pub metrics: crate::scrape::ScrapeAccess,
    /// The authorization server, when `--listen` is a protected resource.
    pub oauth: Option<OAuthOptions>,
    /// Authenticated agents (`agents:`): the bearer credential names the agent.
    pub agents: Option<Arc<attest_core::agents::AgentAuth>>,
}

/// `--oauth-issuer`, `--oauth-jwks`, `--resource`.
pub struct OAuthOptions {
    /// The authorization server whose access tokens are accepted (`--oauth-issuer`).
    pub issuer: String,
    /// Its JWKS URL, when discovery is not to find it (`--oauth-jwks`).
    pub jwks: Option<String>,
    /// This resource's identifier, the tokens' audience (`--resource`).
    pub resource: Option<String>,
}

/// Serves MCP over streamable HTTP at `/mcp`.
pub async fn serve_http(
    attest: Attest,
    options: ProxyOptions,
    listen: ListenOptions,
) -> anyhow::Result<()> {
    let address = listen.address;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address}"))?;
    let bound = listener.local_addr()?;
    let resource = match &listen.oauth {
        Some(oauth) => {
            let resource = oauth
                .resource
                .clone()
                .unwrap_or_else(|| format!("http://{bound}/mcp"));
            let found = Resource::discover(&oauth.issuer, oauth.jwks.as_deref(), &resource)
                .await
                .context("--oauth-issuer: the authorization server's keys")?;
            Some(Arc::new(found))
        }
        None => None,
    };
    let metrics = crate::scrape::route("/metrics", listen.metrics, Arc::clone(attest.ledger()));
    let mut router = router(attest, options, bound.port(), listen.origins, resource);
    if let Some(agents) = listen.agents {
        // Layered last, so it runs first: the session guard sees the proven agent.
        router = router.layer(axum::middleware::from_fn_with_state(
            agents,
            crate::agents::listen_guard,
        ));
    }
    let router = router
        .merge(metrics)
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    println!("attest mcp-proxy listening on http://{bound}/mcp");
    std::io::stdout().flush()?;
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

/// The `/mcp` route: the session guard over the SDK's streamable-HTTP server, and with a
/// protected `resource` its token check in front and its metadata beside.
fn router(
    attest: Attest,
    options: ProxyOptions,
    port: u16,
    origins: Vec<String>,
    resource: Option<Arc<Resource>>,
) -> axum::Router {
    let loopback = ["localhost", "127.0.0.1", "[::1]"];
    let hosts = loopback
        .iter()
        .flat_map(|host| [(*host).to_owned(), format!("{host}:{port}")])
        .chain(["::1".to_owned()]);
    // A browser page elsewhere must not drive a local session (the transport spec's
    // MUST): only pages served from this loopback port, and origins the user named.
    let allowed_origins = loopback
        .iter()
        .map(|host| format!("http://{host}:{port}"))
        .chain(origins);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(allowed_origins)
        .enforce_origin_validation();
    let service = StreamableHttpService::new(
        move || Ok(Relay(Proxy::new(attest.clone(), options.clone()))),
        Arc::new(super::streams::CallStreams::default()),
        config,
    );
    let mcp = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(lift_params_keys))
        .layer(axum::middleware::from_fn_with_state(
            SessionGuard::new(),
            super::sessions::guard,
        ));
    let Some(resource) = resource else {
        return mcp;
    };
    // Layered last, so it runs first: the session guard sees who the token named.
    let mcp = mcp.layer(axum::middleware::from_fn_with_state(
        Arc::clone(&resource),
        super::resource::guard,
    ));
    let metadata = axum::routing::get(super::resource::metadata);
    let well_known = axum::Router::new()
        .route(METADATA_PATH, metadata.clone())
        .route(&format!("{METADATA_PATH}/mcp"), metadata)
        .with_state(resource);
    mcp.merge(well_known)
}

/// SEP-3182's `idempotencyKey` in a POSTed `tools/call`'s params, moved into its `_meta`
/// before the SDK reads the body (it keeps only the params it knows), as the stdio front
/// does for each frame ([`super::keys::lift_params_key`]): one reading of the key on
/// both fronts. A body over the stdio front's frame bound is refused here (413).
async fn lift_params_keys(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, crate::frames::MAX_FRAME_BYTES).await else {
        return axum::http::StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let bytes = match super::keys::lift_params_key(&bytes) {
        Some(lifted) => match serde_json::to_vec(&lifted) {
            Ok(rewritten) => {
                // The body changed length; the server counts it afresh.
                parts.headers.remove(axum::http::header::CONTENT_LENGTH);
                axum::body::Bytes::from(rewritten)
            }
            Err(_) => bytes,
        },
        None => bytes,
    };
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

/// The proxy as the typed handler the SDK's HTTP server wants: each method hands its
/// request, rebuilt as the [`ClientRequest`] it arrived as, to [`Proxy`].
#[derive(Clone)]
struct Relay(Proxy);

impl Relay {
    async fn ask(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        // Boxed: the proxy's future is large, and the SDK's HTTP session polls it on a
        // worker thread's stack beneath its own.
        Box::pin(Service::handle_request(&self.0, request, context)).await
    }

    async fn tell(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) {
        // A notification has no answer: an upstream that is gone shows on the next request.
        let _ = Service::handle_notification(&self.0, notification, context).await;
    }
}

/// A custom request of a method rmcp knows as that method's typed request; any other as
/// it is. (Its `_meta` and HTTP request reach the proxy in the request's context.)
fn typed(request: CustomRequest) -> ClientRequest {
    let value = serde_json::json!({"method": &request.method, "params": &request.params});
    match serde_json::from_value::<ClientRequest>(value) {
        Ok(ClientRequest::CustomRequest(_)) | Err(_) => ClientRequest::CustomRequest(request),
        Ok(typed) => typed,
    }
}

fn unexpected(what: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("the upstream answered {what} with another kind of result"),
        None,
    )
}

/// One relayed method: its params become `$variant`'s request, and the upstream's
/// answer must be the result kind `$pattern` names.
macro_rules! relay {
    ($name:ident($params:ty) -> $out:ty, $wrap:expr, $pattern:pat => $value:expr, $what:literal) => {
        async fn $name(
            &self,
            request: $params,
            context: RequestContext<RoleServer>,
        ) -> Result<$out, ErrorData> {
            match self.ask($wrap(request), context).await? {
                $pattern => Ok($value),
                _ => Err(unexpected($what)),
            }
        }
    };
}

/// A relayed method whose answer is empty: whatever the upstream answered is success.
macro_rules! relay_empty {
    ($name:ident($params:ty), $wrap:expr) => {
        async fn $name(
            &self,
            request: $params,
            context: RequestContext<RoleServer>,
        ) -> Result<(), ErrorData> {
            self.ask($wrap(request), context).await.map(drop)
        }
    };
}

fn paginated<M: Default>(
    request: Option<PaginatedRequestParams>,
) -> RequestOptionalParam<M, PaginatedRequestParams> {
    RequestOptionalParam::with_param(request.unwrap_or_default())
}

#[allow(deprecated)]
impl ServerHandler for Relay {
    fn get_info(&self) -> ServerConfig {
        Service::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        Service::supported_protocol_versions(&self.0)
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.ask(ClientRequest::PingRequest(Default::default()), context)
            .await
            .map(drop)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let wrap = |r| ClientRequest::InitializeRequest(Request::new(r));
        match self.ask(wrap(request), context).await? {
            ServerResult::InitializeResult(result) => Ok(result),
            _ => Err(unexpected("initialize")),
        }
    }

    relay!(list_tools(Option<PaginatedRequestParams>) -> ListToolsResult,
        |r| ClientRequest::ListToolsRequest(paginated(r)),
        ServerResult::ListToolsResult(result) => result, "tools/list");
    relay!(call_tool(CallToolRequestParams) -> CallToolResponse,
        |r| ClientRequest::CallToolRequest(Request::new(r)),
        ServerResult::CallToolResult(result) => CallToolResponse::Complete(result), "tools/call");
    relay!(list_resources(Option<PaginatedRequestParams>) -> ListResourcesResult,
        |r| ClientRequest::ListResourcesRequest(paginated(r)),
        ServerResult::ListResourcesResult(result) => result, "resources/list");
    relay!(list_resource_templates(Option<PaginatedRequestParams>) -> ListResourceTemplatesResult,
        |r| ClientRequest::ListResourceTemplatesRequest(paginated(r)),
        ServerResult::ListResourceTemplatesResult(result) => result, "resources/templates/list");
    relay!(read_resource(ReadResourceRequestParams) -> ReadResourceResponse,
        |r| ClientRequest::ReadResourceRequest(Request::new(r)),
        ServerResult::ReadResourceResult(result) => ReadResourceResponse::Complete(result),
        "resources/read");
    relay!(list_prompts(Option<PaginatedRequestParams>) -> ListPromptsResult,
        |r| ClientRequest::ListPromptsRequest(paginated(r)),
        ServerResult::ListPromptsResult(result) => result, "prompts/list");
    relay!(get_prompt(GetPromptRequestParams) -> GetPromptResponse,
        |r| ClientRequest::GetPromptRequest(Request::new(r)),
        ServerResult::GetPromptResult(result) => GetPromptResponse::Complete(result), "prompts/get");
    relay!(complete(CompleteRequestParams) -> CompleteResult,
        |r| ClientRequest::CompleteRequest(Request::new(r)),
        ServerResult::CompleteResult(result) => result, "completion/complete");
    relay!(get_task(GetTaskParams) -> GetTaskResult,
        |r| ClientRequest::GetTaskRequest(Request::new(r)),
        ServerResult::GetTaskResult(result) => result, "tasks/get");
    relay!(list_skills(Option<PaginatedRequestParams>) -> ListSkillsResult,
        |r| ClientRequest::ListSkillsRequest(paginated(r)),
        ServerResult::ListSkillsResult(result) => result, "skills/list");
    relay!(get_skill(GetSkillRequestParams) -> GetSkillResult,
        |r| ClientRequest::GetSkillRequest(Request::new(r)),
        ServerResult::GetSkillResult(result) => result, "skills/get");

    relay_empty!(set_level(SetLevelRequestParams), |r| {
        ClientRequest::SetLevelRequest(Request::new(r))
    });
    relay_empty!(subscribe(SubscribeRequestParams), |r| {
        ClientRequest::SubscribeRequest(Request::new(r))
    });
    relay_empty!(unsubscribe(UnsubscribeRequestParams), |r| {
        ClientRequest::UnsubscribeRequest(Request::new(r))
    });
    relay_empty!(update_task(UpdateTaskParams), |r| {
        ClientRequest::UpdateTaskRequest(Request::new(r))
    });
    relay_empty!(cancel_task(CancelTaskParams), |r| {
        ClientRequest::CancelTaskRequest(Request::new(r))
    });

    /// A custom method, or one rmcp's handler would answer itself that the session's
    /// transport made a custom request of ([`super::streams`]): relayed as the typed
    /// request it is, its answer passed back whatever its kind.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        match self.ask(typed(request), context).await? {
            ServerResult::CustomResult(result) => Ok(result),
            other => serde_json::to_value(other)
                .map(CustomResult)
                .map_err(|_| unexpected("a custom request")),
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        let notification = rmcp::model::ProgressNotification::new(params);
        self.tell(
            ClientNotification::ProgressNotification(notification),
            context,
        )
        .await;
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        let notification = ClientNotification::RootsListChangedNotification(Default::default());
        self.tell(notification, context).await;
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) {
        self.tell(
            ClientNotification::CustomNotification(notification),
            context,
        )
        .await;
    }
}
