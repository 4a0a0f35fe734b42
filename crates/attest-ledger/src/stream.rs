//! Where each audit stream stands: a cursor per sink, kept beside the chain (in
//! `attest_meta`, so no schema change: an older release opens and appends to a ledger
//! that has one, and ignores it).
//!
//! A streamer sends the rows after its sink's cursor and moves the cursor only after
//! the receiver acknowledged them, so an outage delays rows and never loses one, and a
//! restart resumes after the last acknowledged row. Several streamers may run on one
//! ledger (a gateway and `attest stream run`, or one per host on PostgreSQL): the
//! cursor carries a lease, and every change is one compare-and-swap on the cursor's
//! stored value, so only the lease's holder sends and moves it. A holder that stalls
//! past its lease loses it; the next holder starts from the cursor, so rows the
//! stalled one sent without moving the cursor are sent again (at-least-once), never
//! skipped.

use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::{Ledger, LedgerError};

/// The longest sink name a cursor takes.
const MAX_SINK: usize = 64;

/// One sink's cursor: every row through `seq` was acknowledged by the sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamCursor {
    /// The newest acknowledged row (0: none yet).
    pub seq: u64,
    /// The streamer that holds the lease, if one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// When the lease ends (Unix milliseconds).
    #[serde(default)]
    pub until_ms: i64,
}

impl StreamCursor {
    /// Whether `holder` may send now: it holds the lease, or nobody holds a live one.
    fn free_for(&self, holder: &str, now_ms: i64) -> bool {
        match &self.holder {
            None => true,
            Some(h) if h == holder => true,
            Some(_) => self.until_ms <= now_ms,
        }
    }
}

fn key(sink: &str) -> Result<String, LedgerError> {
    let ok = !sink.is_empty()
        && sink.len() <= MAX_SINK
        && sink
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !ok {
        return Err(LedgerError::StreamSink {
            name: sink.to_owned(),
        });
    }
    Ok(format!("stream_cursor:{sink}"))
}

impl Ledger {
    fn now_ms(&self) -> i64 {
        self.now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// The stored value at `key` and the cursor it holds (seq 0, no lease, when none).
    fn read_cursor(&self, key: &str) -> Result<(Option<String>, StreamCursor), LedgerError> {
        let stored = self.store.meta(key)?;
        let cursor = match &stored {
            None => StreamCursor {
                seq: 0,
                holder: None,
                until_ms: 0,
            },
            Some(text) => serde_json::from_str(text).map_err(|err| LedgerError::StreamCursor {
                key: key.to_owned(),
                detail: err.to_string(),
            })?,
        };
        Ok((stored, cursor))
    }

    fn swap_cursor(
        &self,
        key: &str,
        old: Option<&str>,
        new: &StreamCursor,
    ) -> Result<bool, LedgerError> {
        let text = serde_json::to_string(new).map_err(|err| LedgerError::StreamCursor {
            key: key.to_owned(),
            detail: err.to_string(),
        })?;
        self.store.swap_meta(key, old, &text)
    }

    /// The cursor of sink `sink` (seq 0 when nothing was streamed to it yet).
    pub fn stream_cursor(&self, sink: &str) -> Result<StreamCursor, LedgerError> {
        Ok(self.read_cursor(&key(sink)?)?.1)
    }

    /// Takes or renews the lease on `sink`'s cursor for `holder`, for `lease`; returns the
    /// cursor when `holder` now holds it, `None` while another streamer holds a live
    /// lease (or took it in the meantime).
    pub fn stream_lease(
        &self,
        sink: &str,
        holder: &str,
        lease: Duration,
    ) -> Result<Option<StreamCursor>, LedgerError> {
        let key = key(sink)?;
        let (stored, cursor) = self.read_cursor(&key)?;
        let now = self.now_ms();
        if !cursor.free_for(holder, now) {
            return Ok(None);
        }
        let next = StreamCursor {
            seq: cursor.seq,
            holder: Some(holder.to_owned()),
            until_ms: now.saturating_add(millis(lease)),
        };
        Ok(self
            .swap_cursor(&key, stored.as_deref(), &next)?
            .then_some(next))
    }

    /// Moves `sink`'s cursor from `from` to `to` (the sink acknowledged the rows between)
    /// and renews `holder`'s lease; `false`, changing nothing, when `holder` no longer
    /// holds the lease or the cursor is not at `from` (another streamer moved it).
    pub fn stream_advance(
        &self,
        sink: &str,
        holder: &str,
        from: u64,
        to: u64,
        lease: Duration,
    ) -> Result<bool, LedgerError> {
        let key = key(sink)?;
        let (stored, cursor) = self.read_cursor(&key)?;
        if cursor.seq != from || cursor.holder.as_deref() != Some(holder) || to < from {
            return Ok(false);
        }
        let next = StreamCursor {
            seq: to,
            holder: Some(holder.to_owned()),
            until_ms: self.now_ms().saturating_add(millis(lease)),
        };
        self.swap_cursor(&key, stored.as_deref(), &next)
    }

    /// Gives `holder`'s lease on `sink` up (a streamer stopping), so the next streamer
    /// starts at once instead of when the lease ends; nothing when another holds it.
    pub fn stream_release(&self, sink: &str, holder: &str) -> Result<(), LedgerError> {
        let key = key(sink)?;
        let (stored, cursor) = self.read_cursor(&key)?;
        if cursor.holder.as_deref() != Some(holder) {
            return Ok(());
        }
        let next = StreamCursor {
            seq: cursor.seq,
            holder: None,
            until_ms: 0,
        };
        self.swap_cursor(&key, stored.as_deref(), &next).map(drop)
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
