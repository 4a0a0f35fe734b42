//! `X-Attest-Tenant`: a request to the gateway names the tenant whose chain records it
//! (with that tenant's approvals, signing key and origin), on either store.
//!
//! Fail closed: a malformed name, several values, or a tenant the gateway was not told
//! to serve (`--allow-tenant`) is a 400; a gateway started with `--tenant` serves that
//! tenant only, and a header naming another is a 403. Either way the upstream is never
//! called.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use attest_core::Attest;
use axum::http::{HeaderMap, StatusCode};

/// The header naming the request's tenant (never forwarded, as every `X-Attest-*`).
pub const TENANT_HEADER: &str = "x-attest-tenant";

/// Opens a tenant's pipeline: its ledger, approval store and signing key.
pub type OpenTenant = dyn Fn(&str) -> anyhow::Result<Attest> + Send + Sync;

/// The tenants one gateway serves, and their pipelines, each opened on first use.
pub struct Tenants {
    /// `--tenant`: the gateway's own tenant (its default pipeline's).
    own: Option<String>,
    /// `--allow-tenant`: the other tenants a request may name.
    allowed: Vec<String>,
    open: Arc<OpenTenant>,
    opened: tokio::sync::Mutex<HashMap<String, Attest>>,
}

/// The pipeline a request is for, and whether it is the gateway's own (the one its
/// agents configuration, JWT issuer included, was set up for).
pub struct Picked {
    pub(crate) attest: Attest,
    pub(crate) own: bool,
}

/// Why a request's tenant is refused: the status and the message for the caller.
#[derive(Debug)]
pub struct TenantRefusal {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Tenants {
    /// A gateway of `own` tenant (`None`: the default chain) that also serves `allowed`;
    /// a gateway with its own tenant serves no other.
    pub fn new(
        own: Option<String>,
        allowed: Vec<String>,
        open: Arc<OpenTenant>,
    ) -> anyhow::Result<Tenants> {
        for name in &allowed {
            attest_ledger::check_tenant(name).with_context(|| format!("--allow-tenant {name}"))?;
        }
        anyhow::ensure!(
            own.is_none() || allowed.is_empty(),
            "--allow-tenant serves several tenants from one gateway; --tenant pins it to one: give one or the other"
        );
        Ok(Tenants {
            own,
            allowed,
            open,
            opened: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The pipeline for a request: `default` (the gateway's own) without the header or
    /// when it names the gateway's own tenant; else the named tenant's, whose agent
    /// tokens are its own (see [`attest_core::agents::AgentAuth::in_tenant`]).
    pub async fn pick(
        &self,
        default: &Attest,
        headers: &HeaderMap,
    ) -> Result<Picked, TenantRefusal> {
        let refuse = |status, message: String| TenantRefusal { status, message };
        let mut values = headers.get_all(TENANT_HEADER).iter();
        let Some(value) = values.next() else {
            return Ok(Picked {
                attest: default.clone(),
                own: true,
            });
        };
        if values.next().is_some() {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                format!("{TENANT_HEADER} is given more than once"),
            ));
        }
        let name = value
            .to_str()
            .ok()
            .filter(|name| attest_ledger::check_tenant(name).is_ok())
            .ok_or_else(|| {
                refuse(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "{TENANT_HEADER} is not a tenant name (a-z, 0-9, '-' and '_', at most 63, starting with a letter or digit)"
                    ),
                )
            })?;
        if let Some(own) = &self.own {
            return if name == own {
                Ok(Picked {
                    attest: default.clone(),
                    own: true,
                })
            } else {
                Err(refuse(
                    StatusCode::FORBIDDEN,
                    format!("this gateway serves tenant {own} only"),
                ))
            };
        }
        if !self.allowed.iter().any(|allowed| allowed == name) {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "unknown tenant {name:?}: this gateway serves no such tenant (--allow-tenant)"
                ),
            ));
        }
        let mut opened = self.opened.lock().await;
        let other = |attest: Attest| Picked { attest, own: false };
        if let Some(attest) = opened.get(name) {
            return Ok(other(attest.clone()));
        }
        let open = Arc::clone(&self.open);
        let owned = name.to_owned();
        let attest = tokio::task::spawn_blocking(move || open(&owned))
            .await
            .map_err(|_| {
                refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error".to_owned(),
                )
            })?
            .map_err(|err| {
                eprintln!("attest gateway: tenant {name}: {err:#}");
                refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("tenant {name}'s ledger could not be opened; see the gateway's log"),
                )
            })?;
        opened.insert(name.to_owned(), attest.clone());
        Ok(other(attest))
    }
}
