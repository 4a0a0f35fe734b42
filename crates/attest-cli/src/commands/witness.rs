//! `attest witness` (a C2SP tlog-witness server) and the client side that asks
//! witnesses to cosign a checkpoint (`attest checkpoint --witness URL…`).

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use attest_ledger::tiles::{open_cosigned, CosignerKey, CosigningKey, Witness, MAX_REQUEST_BYTES};
use attest_ledger::{Ledger, VerifierKey};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;

use crate::cli_tiles::{WitnessArgs, WitnessClientArgs};
use crate::commands::tiles::{display_url, http_client, runtime, witness_keys};

pub(crate) fn run(args: &WitnessArgs) -> anyhow::Result<ExitCode> {
    let key = match crate::config::token_uri(&args.key)? {
        // On a token: the witness signs there (PIN from ATTEST_PKCS11_PIN[_FILE]).
        Some(uri) => CosigningKey::from_signing_key(attest_ledger::SigningKey::from_token(
            &uri,
            &crate::config::token_pin()?,
        )?)?,
        None => CosigningKey::load(&args.key)?,
    };
    if args.print_key {
        println!("{}", key.verifier());
        return Ok(ExitCode::SUCCESS);
    }
    let Some(state) = &args.state else {
        anyhow::bail!("attest witness needs --state FILE (where it remembers what it cosigned)");
    };
    if args.log_keys.is_empty() {
        anyhow::bail!("attest witness needs at least one --log-key (the logs it follows)");
    }
    let logs = args
        .log_keys
        .iter()
        .map(|text| VerifierKey::parse(text, "--log-key"))
        .collect::<Result<Vec<_>, _>>()?;
    let ip: IpAddr = args
        .host
        .parse()
        .with_context(|| format!("--host {:?} is not an IP address", args.host))?;
    let witness = Arc::new(Witness::open(key, logs, state)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip, args.port))
            .await
            .with_context(|| format!("cannot listen on {ip}:{}", args.port))?;
        let addr = listener.local_addr()?;
        println!(
            "attest: witness {} on http://{addr}/ (key {})",
            witness.key().name(),
            witness.key().verifier()
        );
        std::io::stdout().flush()?;
        axum::serve(listener, router(witness)).await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The witness's routes: `POST /add-checkpoint`.
fn router(witness: Arc<Witness>) -> Router {
    Router::new()
        .route("/add-checkpoint", post(add_checkpoint))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(witness)
}

async fn add_checkpoint(State(witness): State<Arc<Witness>>, body: Bytes) -> Response {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(1);
    // Saving the state syncs a file: off the async workers.
    let answer = tokio::task::spawn_blocking(move || witness.add_checkpoint(&body, now)).await;
    let text = |status: StatusCode, body: String| {
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            body,
        )
            .into_response()
    };
    match answer {
        Ok(Ok(lines)) => text(StatusCode::OK, lines),
        Ok(Err(attest_ledger::tiles::WitnessError::Conflict { latest, .. })) => (
            StatusCode::CONFLICT,
            [(header::CONTENT_TYPE, "text/x.tlog.size")],
            format!("{latest}\n"),
        )
            .into_response(),
        Ok(Err(err)) => {
            let status =
                StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            if status.is_server_error() {
                eprintln!("attest: witness: {err}");
                text(status, "internal error\n".to_owned())
            } else {
                text(status, format!("{err}\n"))
            }
        }
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error\n".to_owned(),
        ),
    }
}

/// Asks each witness to cosign `note` (the ledger's checkpoint of `size` entries) and
/// returns the note with the cosignatures that verify under `args.witness_keys`, and
/// the witnesses' names. A witness that last cosigned a smaller tree gets a consistency
/// proof from that size (it says which in its 409 answer).
pub(crate) fn collect_cosignatures(
    ledger: &Ledger,
    log_key: &VerifierKey,
    note: &str,
    size: u64,
    args: &WitnessClientArgs,
) -> anyhow::Result<(String, Vec<String>)> {
    if args.witnesses.is_empty() {
        return Ok((note.to_owned(), Vec::new()));
    }
    let keys = witness_keys(&args.witness_keys)?;
    if keys.is_empty() {
        anyhow::bail!("--witness needs --witness-key: cosignatures under unknown keys are dropped");
    }
    let client = http_client()?;
    let runtime = runtime()?;
    let mut cosigned = note.to_owned();
    for url in &args.witnesses {
        let lines = runtime.block_on(ask_witness(&client, ledger, url, note, size))?;
        for line in lines.lines() {
            if is_line_of(line, &keys) {
                cosigned.push_str(line);
                cosigned.push('\n');
            }
        }
    }
    let opened = open_cosigned(cosigned.as_bytes(), std::slice::from_ref(log_key), &keys)
        .context("a witness's cosignature does not verify")?;
    Ok((cosigned, opened.cosigned_by))
}

/// A signature line (`— name base64`) whose name is one of `keys`'.
fn is_line_of(line: &str, keys: &[CosignerKey]) -> bool {
    line.strip_prefix("\u{2014} ")
        .and_then(|rest| rest.split_once(' '))
        .is_some_and(|(name, _)| keys.iter().any(|k| k.name() == name))
}

async fn ask_witness(
    client: &reqwest::Client,
    ledger: &Ledger,
    base: &str,
    note: &str,
    size: u64,
) -> anyhow::Result<String> {
    let mut url = reqwest::Url::parse(base).with_context(|| "bad --witness URL".to_owned())?;
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    let url = url.join("add-checkpoint")?;
    let shown = display_url(&url);
    let mut old = 0u64;
    // At most two rounds: a guess of 0, then the size the witness says it has.
    for _ in 0..2 {
        let proof = if old == 0 || old == size {
            Vec::new()
        } else {
            ledger
                .prove_consistency(old, Some(size))
                .with_context(|| format!("proving size {old} → {size} for {shown}"))?
                .proof
        };
        let mut body = format!("old {old}\n");
        for line in &proof {
            body.push_str(line);
            body.push('\n');
        }
        body.push('\n');
        body.push_str(note);
        let response = client
            .post(url.clone())
            .header("content-type", "text/plain; charset=utf-8")
            .body(body)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach witness {shown}: {}", e.without_url()))?;
        let status = response.status();
        let is_size = response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes() == b"text/x.tlog.size");
        let text = response.text().await.unwrap_or_default();
        if status.is_success() {
            return Ok(text);
        }
        if status == StatusCode::CONFLICT && is_size {
            let latest: u64 = text
                .trim()
                .parse()
                .with_context(|| format!("witness {shown} sent a bad size"))?;
            if latest > size {
                anyhow::bail!(
                    "witness {shown} has cosigned {latest} entries, more than this checkpoint's {size}"
                );
            }
            if latest != old {
                old = latest;
                continue;
            }
        }
        anyhow::bail!(
            "witness {shown} refused (HTTP {status}): {}",
            crate::terminal::escape(text.trim())
        );
    }
    anyhow::bail!("witness {shown} kept changing its size")
}
