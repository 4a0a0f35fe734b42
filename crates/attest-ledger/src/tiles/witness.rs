//! A witness (C2SP `tlog-witness`): cosigns a log's checkpoint only after checking it
//! extends the last one it cosigned for that log, and remembers it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base64::Engine as _;
use tlog_tiles::{check_tree, Hash as TreeHashType};

use super::cosign::{open_cosigned, CosigningKey};
use super::TileError;
use crate::{read_checkpoint_unverified, to_hex, VerifierKey};

/// Longest `add-checkpoint` body accepted: 63 proof lines and a note with signatures.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Why an `add-checkpoint` request was not cosigned, with the HTTP status the protocol
/// gives it ([`WitnessError::status`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WitnessError {
    /// 400: the body is not an `add-checkpoint` request, or the old size is above the
    /// checkpoint's.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// 404: the witness follows no log of this origin.
    #[error("unknown log {0:?}")]
    UnknownLog(String),
    /// 403: no valid signature by the log's key.
    #[error("the checkpoint is not signed by the log: {0}")]
    Forbidden(String),
    /// 409: the old size is not the size this witness last cosigned.
    #[error("the witness last cosigned size {latest}, not {old}")]
    Conflict {
        /// The size the request claimed.
        old: u64,
        /// The size of the latest cosigned checkpoint (the response body).
        latest: u64,
    },
    /// 409: a checkpoint of the size last cosigned, with another root: a split view.
    #[error(
        "a different tree of {size} entries than the one cosigned (root {cosigned}): a split view"
    )]
    SplitView {
        /// The size.
        size: u64,
        /// The root cosigned before, hex.
        cosigned: String,
    },
    /// 422: the consistency proof does not lead from the cosigned tree to this one.
    #[error("the consistency proof from size {old} does not verify")]
    BadProof {
        /// The old size.
        old: u64,
    },
    /// 500: the witness's state could not be saved, so nothing was cosigned.
    #[error("cannot save the witness state: {0}")]
    State(#[source] TileError),
}

impl WitnessError {
    /// The HTTP status code C2SP `tlog-witness` gives this answer.
    pub fn status(&self) -> u16 {
        match self {
            WitnessError::BadRequest(_) => 400,
            WitnessError::UnknownLog(_) => 404,
            WitnessError::Forbidden(_) => 403,
            WitnessError::Conflict { .. } | WitnessError::SplitView { .. } => 409,
            WitnessError::BadProof { .. } => 422,
            WitnessError::State(_) => 500,
        }
    }
}

/// The latest checkpoint cosigned for one log.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Latest {
    size: u64,
    /// Lower-case hex root.
    root: String,
    /// The note as submitted.
    note: String,
}

/// A witness: its key, the logs it follows (their verifier keys), and its state file
/// (the latest cosigned checkpoint per origin, JSON, replaced atomically).
pub struct Witness {
    key: CosigningKey,
    logs: Vec<VerifierKey>,
    state_path: PathBuf,
    state: Mutex<BTreeMap<String, Latest>>,
}

impl std::fmt::Debug for Witness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Witness")
            .field("name", &self.key.name())
            .field("logs", &self.logs)
            .field("state_path", &self.state_path)
            .finish_non_exhaustive()
    }
}

impl Witness {
    /// A witness signing with `key` for the logs whose keys are `logs`, keeping its
    /// state in `state_path` (read now if it exists).
    pub fn open(
        key: CosigningKey,
        logs: Vec<VerifierKey>,
        state_path: &Path,
    ) -> Result<Witness, TileError> {
        let state = match std::fs::read(state_path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| TileError::Malformed {
                path: state_path.display().to_string(),
                detail: format!("not a witness state file: {e}"),
            })?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(TileError::Io {
                    path: state_path.to_path_buf(),
                    source,
                })
            }
        };
        Ok(Witness {
            key,
            logs,
            state_path: state_path.to_path_buf(),
            state: Mutex::new(state),
        })
    }

    /// The witness's cosigning key.
    pub fn key(&self) -> &CosigningKey {
        &self.key
    }

    /// Handles an `add-checkpoint` body at time `now` (Unix seconds): the cosignature
    /// line(s) to answer with, after the new checkpoint is saved.
    pub fn add_checkpoint(&self, body: &[u8], now: u64) -> Result<String, WitnessError> {
        let request = parse_request(body)?;
        let claimed = read_checkpoint_unverified(request.note)
            .map_err(|e| WitnessError::BadRequest(e.to_string()))?;
        let keys: Vec<VerifierKey> = self
            .logs
            .iter()
            .filter(|k| k.name() == claimed.origin)
            .cloned()
            .collect();
        if keys.is_empty() {
            return Err(WitnessError::UnknownLog(claimed.origin));
        }
        let opened = open_cosigned(request.note, &keys, &[])
            .map_err(|e| WitnessError::Forbidden(e.to_string()))?;
        let checkpoint = opened.body;
        if request.old > checkpoint.size {
            return Err(WitnessError::BadRequest(format!(
                "old size {} is above the checkpoint's {}",
                request.old, checkpoint.size
            )));
        }
        // The check and the save happen under one lock (the spec's rollback race).
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let latest = state.get(&checkpoint.origin);
        let latest_size = latest.map_or(0, |l| l.size);
        if request.old != latest_size {
            return Err(WitnessError::Conflict {
                old: request.old,
                latest: latest_size,
            });
        }
        if let Some(latest) = latest {
            let cosigned_root = crate::from_hex(&latest.root).ok_or(WitnessError::State(
                TileError::Internal("a stored root is not hex"),
            ))?;
            if checkpoint.size == latest.size {
                if checkpoint.root != cosigned_root {
                    return Err(WitnessError::SplitView {
                        size: latest.size,
                        cosigned: latest.root.clone(),
                    });
                }
                if !request.proof.is_empty() {
                    // The proof between a tree and itself is empty.
                    return Err(WitnessError::BadProof { old: request.old });
                }
            } else {
                let proof: Vec<TreeHashType> =
                    request.proof.iter().map(|h| TreeHashType(*h)).collect();
                check_tree(
                    &proof,
                    checkpoint.size,
                    TreeHashType(checkpoint.root),
                    latest.size,
                    TreeHashType(cosigned_root),
                )
                .map_err(|_| WitnessError::BadProof { old: request.old })?;
            }
        } else if !request.proof.is_empty() {
            return Err(WitnessError::BadProof { old: 0 });
        }
        let text_end = find_text_end(request.note)
            .ok_or_else(|| WitnessError::BadRequest("the note has no signature block".into()))?;
        let line = self
            .key
            .cosign(&request.note[..text_end], now.max(1))
            .map_err(WitnessError::State)?;
        let mut next = state.clone();
        next.insert(
            checkpoint.origin.clone(),
            Latest {
                size: checkpoint.size,
                root: to_hex(&checkpoint.root),
                note: String::from_utf8_lossy(request.note).into_owned(),
            },
        );
        save_state(&self.state_path, &next).map_err(WitnessError::State)?;
        // Commit point: saved before answering.
        *state = next;
        Ok(line)
    }
}

struct Request<'b> {
    old: u64,
    proof: Vec<[u8; 32]>,
    note: &'b [u8],
}

fn parse_request(body: &[u8]) -> Result<Request<'_>, WitnessError> {
    let bad = |detail: &str| WitnessError::BadRequest(detail.to_owned());
    if body.len() > MAX_REQUEST_BYTES {
        return Err(bad("the body is over 64 KiB"));
    }
    let mut rest = body;
    let mut next_line = || -> Option<&[u8]> {
        let end = rest.iter().position(|b| *b == b'\n')?;
        let line = &rest[..end];
        rest = &rest[end + 1..];
        Some(line)
    };
    let first = next_line().ok_or_else(|| bad("no old size line"))?;
    let digits = first
        .strip_prefix(b"old ")
        .ok_or_else(|| bad("the first line is not `old <size>`"))?;
    let canonical = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits == b"0" || digits[0] != b'0');
    let old: u64 = std::str::from_utf8(digits)
        .ok()
        .filter(|_| canonical)
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| bad("the old size is not a decimal without leading zeros"))?;
    let mut proof = Vec::new();
    loop {
        let line = next_line().ok_or_else(|| bad("no empty line before the checkpoint"))?;
        if line.is_empty() {
            break;
        }
        if proof.len() == 63 {
            return Err(bad("more than 63 consistency proof lines"));
        }
        let hash: [u8; 32] = base64::engine::general_purpose::STANDARD
            .decode(line)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(|| bad("a proof line is not a base64 32-byte hash"))?;
        proof.push(hash);
    }
    Ok(Request {
        old,
        proof,
        note: rest,
    })
}

/// The end of a note's text (after its last text line's newline, before the blank line).
fn find_text_end(note: &[u8]) -> Option<usize> {
    note.windows(2).rposition(|w| w == b"\n\n").map(|at| at + 1)
}

fn save_state(path: &Path, state: &BTreeMap<String, Latest>) -> Result<(), TileError> {
    let io = |source| TileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let bytes = serde_json::to_vec_pretty(state)
        .map_err(|_| TileError::Internal("the witness state does not serialize"))?;
    let mut temp = path.to_path_buf().into_os_string();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let result = (|| {
        let mut file = options.open(&temp)?;
        std::io::Write::write_all(&mut file, &bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    result.map_err(io)
}
