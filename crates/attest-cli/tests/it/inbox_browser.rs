//! The approval inbox in a real browser: headless Chromium, driven over the DevTools
//! protocol, loads the page, fills in who approves, clicks Approve, and the action
//! waiting in this process runs; the page then confirms the decision and lists it in its
//! history. Screenshots go to `target/test-artifacts/` (and with
//! `ATTEST_UPDATE_SCREENSHOTS=1`, `docs/inbox.png` and `docs/inbox-pending.png`).
//!
//! Skipped, with a message, only when no Chromium is installed (`.ci/run` installs
//! Debian's `chromium`; `ATTEST_CHROMIUM` names another binary).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::approvals::{add_approver, payment, pipeline, serve};

/// How long one DevTools call may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a page may take to show what a test waits for.
const WAIT_TIMEOUT: Duration = Duration::from_secs(120);

pub(crate) fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ATTEST_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let names = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ];
    let dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    ["/usr/bin/chromium"]
        .iter()
        .map(PathBuf::from)
        .chain(
            dirs.iter()
                .flat_map(|d| names.iter().map(move |n| d.join(n))),
        )
        .find(|p| p.is_file())
}

/// A headless Chromium, closed when dropped.
pub(crate) struct Browser {
    child: Child,
    pub(crate) ws_url: String,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn launch(binary: &Path) -> Browser {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1100,800",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Chromium prints its DevTools address on stderr once it listens.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("DevTools listening on ") {
                let _ = tx.send(url.trim().to_owned());
            }
        }
    });
    let ws_url = rx
        .recv_timeout(ANSWER_TIMEOUT)
        .expect("chromium did not print its DevTools address");
    Browser {
        child,
        ws_url,
        _profile: profile,
    }
}

/// A minimal DevTools protocol client: one browser connection, flat sessions.
pub(crate) struct Cdp {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next: u64,
}

impl Cdp {
    pub(crate) async fn connect(url: &str) -> Cdp {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Cdp { ws, next: 0 }
    }

    /// Opens `url` in a new tab and attaches to it; returns the tab's session id.
    pub(crate) async fn open_page(&mut self, url: &str) -> String {
        let target = self
            .call(None, "Target.createTarget", json!({ "url": url }))
            .await;
        self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        )
        .await["sessionId"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A DevTools call's result, or its error.
    pub(crate) async fn try_call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, Value> {
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.ws
            .send(Message::Text(message.to_string().into()))
            .await
            .unwrap();
        loop {
            // Generous: Chromium answers slowly on a loaded 2-core machine.
            let frame = tokio::time::timeout(ANSWER_TIMEOUT, self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method} in {ANSWER_TIMEOUT:?}"))
                .unwrap()
                .unwrap();
            let Message::Text(text) = frame else { continue };
            let value: Value = serde_json::from_str(&text).unwrap();
            if value["id"] == id {
                return match value.get("error") {
                    None => Ok(value["result"].clone()),
                    Some(error) => Err(error.clone()),
                };
            }
        }
    }

    pub(crate) async fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Value {
        match self.try_call(session, method, params).await {
            Ok(result) => result,
            Err(error) => panic!("{method}: {error}"),
        }
    }

    /// Evaluates `expression` in the page and returns its value.
    pub(crate) async fn eval(&mut self, session: &str, expression: &str) -> Value {
        let result = self
            .call(Some(session), "Runtime.evaluate", evaluating(expression))
            .await;
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is `true`: in the page, re-checked on every change to the
    /// document (a MutationObserver), so it answers as soon as the page shows it, not at
    /// the next poll. A page still loading (its context replaced) is waited for again.
    pub(crate) async fn wait_for(&mut self, session: &str, expression: &str, what: &str) {
        let deadline = Instant::now() + WAIT_TIMEOUT;
        let waiting = format!(
            "new Promise((resolve) => {{
               const holds = () => {{ try {{ return ({expression}) === true; }} catch (e) {{ return false; }} }};
               if (holds()) return resolve(true);
               const observer = new MutationObserver(() => {{
                 if (holds()) {{ observer.disconnect(); clearTimeout(timer); resolve(true); }}
               }});
               observer.observe(document, {{ subtree: true, childList: true, attributes: true, characterData: true }});
               const timer = setTimeout(() => {{ observer.disconnect(); resolve(holds()); }}, 5000);
             }})"
        );
        loop {
            let answer = self
                .try_call(Some(session), "Runtime.evaluate", evaluating(&waiting))
                .await;
            if answer.is_ok_and(|a| a["result"]["value"] == json!(true)) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
        }
    }

    /// Types `token` into the page's sign-in form and submits it, as a person would.
    pub(crate) async fn sign_in(&mut self, session: &str, token: &str) {
        self.eval(session, "document.getElementById('token').focus()")
            .await;
        self.call(Some(session), "Input.insertText", json!({"text": token}))
            .await;
        self.click(session, "#login button").await;
    }

    /// A real mouse click at the centre of the element `selector` matches, scrolled into
    /// view first (a click outside the viewport reaches nothing).
    pub(crate) async fn click(&mut self, session: &str, selector: &str) {
        let rect = self
            .eval(
                session,
                &format!(
                    "(() => {{ const e = document.querySelector({selector:?}); e.scrollIntoView({{block: 'center'}}); \
                     const r = e.getBoundingClientRect(); \
                     return {{x: r.x + r.width / 2, y: r.y + r.height / 2}}; }})()"
                ),
            )
            .await;
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.call(
                Some(session),
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": rect["x"], "y": rect["y"], "button": "left", "clickCount": 1}),
            )
            .await;
        }
    }

    pub(crate) async fn screenshot(&mut self, session: &str, path: &Path) {
        let shot = self
            .call(
                Some(session),
                "Page.captureScreenshot",
                json!({"format": "png"}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

/// `Runtime.evaluate`'s parameters for `expression`: its value, a promise awaited.
fn evaluating(expression: &str) -> Value {
    json!({"expression": expression, "returnByValue": true, "awaitPromise": true})
}

pub(crate) fn artifacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("test-artifacts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_in_the_browser_runs_the_waiting_action() {
    let Some(chromium) = find_chromium() else {
        crate::peer_missing("no Chromium (install Debian's `chromium`, or set ATTEST_CHROMIUM)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let attest = pipeline(dir.path(), Duration::from_secs(60));
    let token = add_approver(dir.path(), "ann@acme.com", &[]);
    let server = serve(dir.path(), &[]);

    // The agent's call waits in this process for a person to decide.
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let waiting = tokio::spawn(async move {
        attest
            .call(payment())
            .run(move |params| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    Ok::<_, attest_core::ToolError>(
                        json!({"id": "py_1", "amount": params["amount"]}),
                    )
                }
            })
            .await
    });

    let browser = launch(&chromium);
    let mut cdp = Cdp::connect(&browser.ws_url).await;
    let session = cdp.open_page(&format!("{}/", server.url)).await;
    cdp.call(
        Some(&session),
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    // Signed out, the page shows nothing but the login; sign in the way a person would.
    cdp.wait_for(
        &session,
        "(document.getElementById('login') || {hidden: true}).hidden === false",
        "the login form",
    )
    .await;
    // It says where a token comes from, and links to the dashboard.
    let help = cdp
        .eval(
            &session,
            "document.getElementById('signin-help').checkVisibility() && document.getElementById('signin-help').textContent",
        )
        .await;
    assert!(
        help.as_str().unwrap().contains("attest approvers add"),
        "{help}"
    );
    assert_eq!(
        cdp.eval(
            &session,
            "document.getElementById('dashboard-link').getAttribute('href')"
        )
        .await,
        json!("/dashboard")
    );
    assert_eq!(
        cdp.eval(&session, "document.querySelectorAll('section.card').length")
            .await,
        json!(0)
    );
    cdp.sign_in(&session, &token).await;
    cdp.wait_for(
        &session,
        "document.querySelectorAll('section.card button.approve').length === 1",
        "the pending request on the page",
    )
    .await;
    let who = cdp
        .eval(&session, "document.getElementById('approver').textContent")
        .await;
    assert_eq!(who, json!("ann@acme.com"));
    // The token is in this tab's sessionStorage only, never in a cookie or localStorage.
    assert_eq!(
        cdp.eval(&session, "document.cookie + JSON.stringify(localStorage)")
            .await,
        json!("{}")
    );
    let shown = cdp
        .eval(&session, "document.querySelector('section.card').innerText")
        .await;
    let shown = shown.as_str().unwrap();
    assert!(shown.contains("stripe.pay → acct_42"), "{shown}");
    assert!(shown.contains("payments need finance"), "{shown}");
    assert!(shown.contains("ann@acme.com, raj@acme.com"), "{shown}");
    // Times are relative, the local time on hover; never raw ISO with microseconds.
    assert!(shown.contains("asked just now · expires in "), "{shown}");
    let iso = r"/\d{4}-\d\d-\d\dT/.test(document.querySelector('section.card').innerText)";
    assert_eq!(cdp.eval(&session, iso).await, json!(false), "{shown}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    assert_eq!(
        cdp.eval(
            &session,
            "document.getElementById('signin-help').checkVisibility()"
        )
        .await,
        json!(false)
    );
    crate::dashboard_browser::shoot(&mut cdp, &session, "inbox-pending.png").await;
    cdp.click(&session, "section.card button.approve").await;

    let receipt = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting action did not finish")
        .unwrap()
        .unwrap()
        .into_receipt();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(receipt.approver.as_deref(), Some("ann@acme.com"));
    // The intent, then the outcome.
    assert_eq!(receipt.seq, 2);

    cdp.wait_for(
        &session,
        "document.body.innerText.includes('Nothing is waiting for a decision')",
        "the inbox to empty",
    )
    .await;
    // The card is gone, and the page says what was decided and what happens next.
    let notice = cdp
        .eval(
            &session,
            "document.getElementById('notice').checkVisibility() && document.getElementById('notice').innerText",
        )
        .await;
    let notice = notice.as_str().unwrap();
    assert!(
        notice.contains("Approved stripe.pay → acct_42") && notice.contains("ann@acme.com"),
        "{notice}"
    );
    // The decision heads the history, with who decided and when.
    cdp.wait_for(
        &session,
        "document.querySelectorAll('#decided li[data-status]').length === 1",
        "the decision history",
    )
    .await;
    let history = cdp
        .eval(
            &session,
            "(() => { const li = document.querySelector('#decided li'); const t = li.querySelector('time'); \
             return [li.dataset.status, li.innerText, t.textContent, t.title === new Date(t.getAttribute('datetime')).toLocaleString()]; })()",
        )
        .await;
    assert_eq!(history[0], json!("approved"));
    assert!(
        history[1]
            .as_str()
            .unwrap()
            .contains("stripe.pay → acct_42 · by ann@acme.com"),
        "{history}"
    );
    assert_eq!(
        (&history[2], &history[3]),
        (&json!("just now"), &json!(true))
    );
    crate::dashboard_browser::shoot(&mut cdp, &session, "inbox.png").await;
    let _ = cdp.call(None, "Browser.close", json!({})).await;
}

/// The link a held call hands out (`/requests/ID`) opens that request's page: signed
/// out, the sign-in form; signed in, what the call does, where it goes, its params
/// labelled, and the buttons; approving it there is recorded. Saves a screenshot of the
/// page to `target/screenshots/inbox-request.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_a_held_call_hands_out_opens_its_page_after_sign_in() {
    let Some(chromium) = find_chromium() else {
        crate::peer_missing("no Chromium (install Debian's `chromium`, or set ATTEST_CHROMIUM)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let attest = pipeline(dir.path(), Duration::ZERO);
    let mut action = payment();
    action.extra.method = Some("POST".to_owned());
    action.extra.url = Some("https://api.stripe.com/v1/charges".to_owned());
    let held = attest
        .call(action)
        .run(|_| async { Ok::<_, attest_core::ToolError>(json!({"id": "py_1"})) })
        .await
        .unwrap();
    let attest_core::Outcome::Held { id, .. } = held else {
        panic!("expected a held call, got {held:?}")
    };
    let token = add_approver(dir.path(), "ann@acme.com", &[]);
    let server = serve(dir.path(), &[]);
    let link = attest_core::door::request_link(&server.url, &id);

    let browser = launch(&chromium);
    let mut cdp = Cdp::connect(&browser.ws_url).await;
    let session = cdp.open_page(&link).await;
    cdp.call(
        Some(&session),
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    cdp.wait_for(
        &session,
        "(document.getElementById('login') || {hidden: true}).hidden === false",
        "the login form",
    )
    .await;
    cdp.sign_in(&session, &token).await;
    cdp.wait_for(
        &session,
        "document.querySelectorAll('section.card button.approve').length === 1",
        "the request's card",
    )
    .await;
    let shown = cdp
        .eval(&session, "document.getElementById('list').innerText")
        .await;
    let shown = shown.as_str().unwrap();
    for expected in [
        "stripe.pay → acct_42",
        "Goes to POST https://api.stripe.com/v1/charges",
        "Params preview",
        "The whole call's params",
        "cus_9",
    ] {
        assert!(shown.contains(expected), "{expected:?} in {shown}");
    }
    let screenshots = artifacts().join("../screenshots");
    cdp.screenshot(&session, &screenshots.join("inbox-request.png"))
        .await;
    cdp.click(&session, "section.card button.approve").await;
    cdp.wait_for(
        &session,
        "document.querySelector('section.card .badge.approved') !== null",
        "the request shown approved",
    )
    .await;
    let request = attest.approvals().unwrap().get_by_id(&id).unwrap();
    assert_eq!(request.approver.as_deref(), Some("ann@acme.com"));
}
