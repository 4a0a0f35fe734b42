//! MCP over stdio, one JSON-RPC message a line, with every bad frame answered.
//!
//! The SDK's own stdio transport drops unparsable lines without a word, so a client whose
//! request was mangled waits forever. This one reads each line itself (capped at
//! [`MAX_FRAME_BYTES`]) and answers what it cannot use with a JSON-RPC error whose `id` is
//! `null`, the way JSON-RPC 2.0 §5 asks, then reads on:
//!
//! | frame | answer |
//! |---|---|
//! | not UTF-8, or not JSON | `-32700` parse error |
//! | JSON, but not a JSON-RPC message (a request with an `id` the SDK cannot read) | `-32600` invalid request, with that `id` |
//! | longer than [`MAX_FRAME_BYTES`] | `-32600` invalid request; the line is skipped to its end, never held in memory |
//! | a notification that is not understood | nothing (JSON-RPC never answers a notification) |
//!
//! End of input ends the session, as before. Replies and errors go out through one
//! writer, a whole line at a time, so they never interleave.

use std::future::Future;
use std::sync::Arc;

use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// The longest frame read, in bytes (the SDK's own limit).
pub(crate) const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC 2.0's parse error.
const PARSE_ERROR: i64 = -32700;

/// JSON-RPC 2.0's invalid request.
const INVALID_REQUEST: i64 = -32600;

/// The UTF-8 byte order mark some clients put before a line.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The transport over this process's stdin and stdout.
pub(crate) fn stdio<Role: ServiceRole>(
) -> Frames<Role, rmcp::transport::io::StdioReader, rmcp::transport::io::StdioWriter> {
    let (read, write) = rmcp::transport::io::stdio_pipes();
    Frames::new(read, write, MAX_FRAME_BYTES)
}

/// A line-delimited JSON-RPC transport that answers bad frames.
pub(crate) struct Frames<Role, R, W> {
    read: BufReader<R>,
    write: Arc<Mutex<W>>,
    max: usize,
    line: Vec<u8>,
    oversized: bool,
    _role: std::marker::PhantomData<fn() -> Role>,
}

/// What one read of a line found.
enum Line {
    /// A whole line is in the buffer.
    Whole,
    /// The line was longer than the cap; it has been skipped.
    Oversized,
    /// The input ended (or broke).
    End,
}

impl<Role, R, W> Frames<Role, R, W>
where
    R: tokio::io::AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub(crate) fn new(read: R, write: W, max: usize) -> Self {
        Frames {
            read: BufReader::new(read),
            write: Arc::new(Mutex::new(write)),
            max,
            line: Vec::new(),
            oversized: false,
            _role: std::marker::PhantomData,
        }
    }

    /// Reads one line into `self.line` (without its `\n`), never buffering more than the
    /// cap. Cancel-safe: the service loop drops this future whenever something else is
    /// ready, so a partial line stays in `self.line` and the next call goes on with it.
    async fn read_line(&mut self) -> Line {
        loop {
            let available = match self.read.fill_buf().await {
                // A last line without a newline still counts.
                Ok([]) if self.oversized => {
                    self.oversized = false;
                    return Line::Oversized;
                }
                Ok([]) if self.line.is_empty() => return Line::End,
                Ok([]) => return Line::Whole,
                Ok(bytes) => bytes,
                Err(_) => return Line::End,
            };
            let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
                Some(at) => (available.get(..at).unwrap_or(&[]), Some(at + 1)),
                None => (available, None),
            };
            if !self.oversized && self.line.len() + chunk.len() <= self.max {
                self.line.extend_from_slice(chunk);
            } else {
                self.oversized = true;
                self.line.clear();
            }
            let used = done.unwrap_or(available.len());
            self.read.consume(used);
            if done.is_some() {
                if self.oversized {
                    self.oversized = false;
                    return Line::Oversized;
                }
                return Line::Whole;
            }
        }
    }

    /// Sends a JSON-RPC error line on its own task, so that a cancelled `receive` never
    /// leaves half a line written.
    fn answer(&self, code: i64, message: String, id: Value) {
        let write = Arc::clone(&self.write);
        tokio::spawn(async move {
            let error =
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
            // The output gone is the session ending: the next read sees it too.
            let _ = write_line(&write, &error).await;
        });
    }
}

/// Writes `value` and a newline as one locked write, then flushes.
async fn write_line<W: AsyncWrite + Unpin>(
    write: &Mutex<W>,
    value: &impl serde::Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    let mut write = write.lock().await;
    write.write_all(&line).await?;
    write.flush().await
}

/// What a line that is not a usable message deserves.
fn classify(line: &[u8]) -> Option<(i64, String, Value)> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Some((
            PARSE_ERROR,
            "parse error: the frame is not UTF-8".to_owned(),
            Value::Null,
        ));
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(err) => {
            return Some((PARSE_ERROR, format!("parse error: {err}"), Value::Null));
        }
    };
    match value.get("id") {
        // A notification (no id) is never answered.
        None if value.get("method").is_some() => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some((
            INVALID_REQUEST,
            "invalid request: not a JSON-RPC message this server understands".to_owned(),
            id.clone(),
        )),
        _ => Some((
            INVALID_REQUEST,
            "invalid request: not a JSON-RPC message".to_owned(),
            Value::Null,
        )),
    }
}

impl<Role, R, W> Transport<Role> for Frames<Role, R, W>
where
    Role: ServiceRole,
    R: tokio::io::AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<Role>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = Arc::clone(&self.write);
        async move { write_line(&write, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        loop {
            match self.read_line().await {
                Line::End => return None,
                Line::Oversized => {
                    let message = format!(
                        "invalid request: the frame is longer than {} bytes",
                        self.max
                    );
                    self.answer(INVALID_REQUEST, message, Value::Null);
                    continue;
                }
                Line::Whole => {}
            }
            let whole = std::mem::take(&mut self.line);
            let line = whole.strip_suffix(b"\r").unwrap_or(&whole);
            let line = line.strip_prefix(BOM).unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // SEP-3182's `idempotencyKey` in a call's params, kept in its `_meta`.
            if let Some(lifted) = crate::mcp::keys::lift_params_key(line) {
                if let Ok(message) = serde_json::from_value::<RxJsonRpcMessage<Role>>(lifted) {
                    return Some(message);
                }
            } else if let Ok(message) = serde_json::from_slice::<RxJsonRpcMessage<Role>>(line) {
                return Some(message);
            }
            if let Some((code, message, id)) = classify(line) {
                self.answer(code, message, id);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.flush().await
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn bad_frames_are_classified() {
        let (code, _, id) = classify(b"\xff\xfe").unwrap();
        assert_eq!((code, id), (PARSE_ERROR, Value::Null));
        let (code, _, _) = classify(b"{\"a\"").unwrap();
        assert_eq!(code, PARSE_ERROR);
        let (code, _, id) = classify(br#"{"jsonrpc":"2.0","id":7}"#).unwrap();
        assert_eq!((code, id), (INVALID_REQUEST, json!(7)));
        let (code, _, id) = classify(br#"[1, 2]"#).unwrap();
        assert_eq!((code, id), (INVALID_REQUEST, Value::Null));
        assert!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/odd","params":3}"#).is_none()
        );
    }

    /// Feeds `input` to a server transport with a `max`-byte cap; returns how many messages
    /// it delivered and the lines it wrote back.
    fn run(input: &[u8], max: usize) -> (usize, Vec<Value>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut frames =
                Frames::<rmcp::RoleServer, &[u8], Vec<u8>>::new(input, Vec::new(), max);
            let mut delivered = 0;
            while Transport::<rmcp::RoleServer>::receive(&mut frames)
                .await
                .is_some()
            {
                delivered += 1;
            }
            // Let the spawned error writers finish.
            for _ in 0..64 {
                tokio::task::yield_now().await;
            }
            let written = frames.write.lock().await.clone();
            let lines = written
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).unwrap())
                .collect();
            (delivered, lines)
        })
    }

    #[test]
    fn oversized_frames_are_answered_and_skipped() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
        let (delivered, lines) = run(&input, 64);
        assert_eq!(delivered, 1);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["error"]["code"], INVALID_REQUEST);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The fuzz campaign's MCP part: any bytes end in a finished session, and every
        /// line written back is a JSON-RPC error.
        #[test]
        fn any_bytes_get_errors_never_a_panic_or_a_hang(
            lines in proptest::collection::vec(
                prop_oneof![
                    proptest::collection::vec(any::<u8>(), 0..80),
                    "[\\[\\]{}\":,0-9a-z ]{0,60}".prop_map(String::into_bytes),
                    Just(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec()),
                ],
                0..12,
            ),
        ) {
            let input = lines.join(&b'\n');
            let (_, written) = run(&input, 64);
            for line in written {
                prop_assert!(line["error"]["code"].is_i64(), "{}", line);
                prop_assert_eq!(&line["jsonrpc"], "2.0");
            }
        }
    }
}
