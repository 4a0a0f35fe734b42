//! Rows as OCSF API Activity events (the `attest export --format ocsf` mapping), one
//! JSON array per batch, signed like the webhook: `X-Attest-Timestamp` and
//! `X-Attest-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>`, so the
//! receiver checks it with the webhook's check (`verify_webhook`).

use serde_json::Value;

use super::{Row, StreamError};
use crate::review::ocsf::row_event;

/// The request body for `rows`.
pub(crate) fn encode(rows: &[Row]) -> Result<Vec<u8>, StreamError> {
    let events = rows
        .iter()
        .map(|row| {
            row_event(row.seq, &row.body).map_err(|err| StreamError::BadRow {
                seq: row.seq,
                detail: err.to_string(),
            })
        })
        .collect::<Result<Vec<Value>, _>>()?;
    serde_json::to_vec(&events).map_err(|err| StreamError::BadRow {
        seq: rows.first().map_or(0, |r| r.seq),
        detail: err.to_string(),
    })
}
