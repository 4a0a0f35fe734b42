//! E-mail: a plain-text notice over SMTP (lettre, rustls) for each new request, with
//! the one-click links for each approver the rule names.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use attest_ledger::{Clock, SystemClock};
use lettre::message::{header::ContentType, Mailbox};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::Value;

use super::webhook::{links, request_page};
use super::{ApprovalRequest, LinkSigner, Notice, Notifier, NotifyError, Secret};

/// How long one SMTP exchange may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(20);

/// How an SMTP connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SmtpSecurity {
    /// STARTTLS, required (port 587 by default).
    StartTls,
    /// TLS from the first byte (port 465 by default).
    Tls,
    /// None: only for a relay on this machine (port 25 by default).
    Plain,
}

impl SmtpSecurity {
    /// The usual port for this kind of connection.
    pub fn default_port(self) -> u16 {
        match self {
            SmtpSecurity::StartTls => 587,
            SmtpSecurity::Tls => 465,
            SmtpSecurity::Plain => 25,
        }
    }
}

/// Mails each new request to a fixed list of people.
pub struct EmailNotifier {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    to: Vec<Mailbox>,
    clock: Arc<dyn Clock>,
    links: Option<LinkSigner>,
}

impl std::fmt::Debug for EmailNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailNotifier")
            .field("from", &self.from.to_string())
            .field("to", &self.to.len())
            .finish_non_exhaustive()
    }
}

impl EmailNotifier {
    /// Sends through `host:port` as `from` to each of `to`; with `login` (user, password)
    /// it authenticates. Addresses are checked here.
    pub fn new(
        host: &str,
        port: u16,
        security: SmtpSecurity,
        from: &str,
        to: &[String],
        login: Option<(String, Secret)>,
    ) -> Result<EmailNotifier, NotifyError> {
        let build = |detail: String| NotifyError::Build {
            notifier: "email",
            detail,
        };
        let from: Mailbox = from
            .parse()
            .map_err(|err| build(format!("from {from:?}: {err}")))?;
        let to = to
            .iter()
            .map(|address| {
                address
                    .parse::<Mailbox>()
                    .map_err(|err| build(format!("to {address:?}: {err}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if to.is_empty() {
            return Err(build("no recipients".to_owned()));
        }
        let tls = match security {
            SmtpSecurity::Plain => Tls::None,
            SmtpSecurity::StartTls | SmtpSecurity::Tls => {
                let params = TlsParameters::new(host.to_owned())
                    .map_err(|err| build(format!("tls for {host}: {err}")))?;
                if security == SmtpSecurity::Tls {
                    Tls::Wrapper(params)
                } else {
                    Tls::Required(params)
                }
            }
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
            .port(port)
            .tls(tls)
            .timeout(Some(SMTP_TIMEOUT));
        if let Some((user, password)) = login {
            let password = String::from_utf8_lossy(password.expose()).into_owned();
            builder = builder.credentials(Credentials::new(user, password));
        }
        Ok(EmailNotifier {
            transport: builder.build(),
            from,
            to,
            clock: Arc::new(SystemClock),
            links: None,
        })
    }

    /// Adds one-click approve/reject links to each notice.
    pub fn with_links(mut self, links: LinkSigner) -> Self {
        self.links = Some(links);
        self
    }

    /// The clock for links.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The message's subject and plain-text body for `request`.
    pub fn compose(&self, request: &ApprovalRequest) -> Result<(String, String), NotifyError> {
        let summary = request.summary();
        let label = one_line(&request.action.label());
        let subject = format!(
            "Approval needed: {label} ({} risk)",
            request.verdict.tier.as_str()
        );
        let mut body = format!(
            "An agent's action waits for a person.\n\n\
             action:   {label}\n\
             agent:    {}\n\
             for:      {}\n\
             risk:     {}\n\
             why:      {}\n\
             params:   {}\n\
             expires:  {}\n\
             request:  {}\n",
            one_line(summary["agent"].as_str().unwrap_or("-")),
            one_line(summary["actor"].as_str().unwrap_or("-")),
            request.verdict.tier.as_str(),
            one_line(&request.verdict.reasons.join("; ")),
            one_line(&serde_json::to_string(&summary["params_preview"]).unwrap_or_default()),
            summary["expires_at"].as_str().unwrap_or("-"),
            request.id,
        );
        if let Value::Array(pairs) = links(self.links.as_ref(), request, self.clock.now())? {
            for pair in pairs {
                body.push_str(&format!(
                    "\nFor {}:\n  approve: {}\n  reject:  {}\n",
                    one_line(pair["approver"].as_str().unwrap_or_default()),
                    pair["approve"].as_str().unwrap_or_default(),
                    pair["reject"].as_str().unwrap_or_default(),
                ));
            }
        }
        if let Some(page) = request_page(self.links.as_ref(), request)? {
            body.push_str(&format!(
                "\nSign in to decide (a link alone does not count for this request): {page}\n"
            ));
        }
        body.push_str(&format!(
            "\nOr decide in the inbox, or with `attest confirm {} approve|reject`.\n",
            request.id
        ));
        Ok((subject, body))
    }
}

/// Text from an agent on one line, without control characters (no header injection).
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[async_trait]
impl Notifier for EmailNotifier {
    fn name(&self) -> &str {
        "email"
    }

    async fn notify(&self, request: &ApprovalRequest) -> Result<(), NotifyError> {
        let (subject, body) = self.compose(request)?;
        self.send(subject, body).await
    }

    async fn announce(&self, notice: &Notice) -> Result<(), NotifyError> {
        self.send(one_line(&notice.title), notice.text.clone())
            .await
    }
}

impl EmailNotifier {
    /// Mails `body` under `subject` to every recipient.
    async fn send(&self, subject: String, body: String) -> Result<(), NotifyError> {
        let mut message = Message::builder()
            .from(self.from.clone())
            .subject(subject)
            .header(ContentType::TEXT_PLAIN);
        for to in &self.to {
            message = message.to(to.clone());
        }
        let message = message.body(body).map_err(|err| NotifyError::Build {
            notifier: "email",
            detail: err.to_string(),
        })?;
        self.transport
            .send(message)
            .await
            .map_err(|err| NotifyError::Smtp {
                detail: err.to_string(),
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_addresses_are_named() {
        let err = EmailNotifier::new(
            "localhost",
            25,
            SmtpSecurity::Plain,
            "not an address",
            &["ops@acme.com".to_owned()],
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("from \"not an address\""), "{err}");
        assert!(one_line("a\r\nBcc: x").find('\n').is_none());
    }
}
