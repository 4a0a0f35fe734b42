//! The dashboard's answers, cached for one write generation of the ledger: a poll that
//! finds nothing new written gets the bytes it got before without folding rows again.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use axum::body::Bytes;

/// Cached answers kept per generation.
const MAX_CACHED: usize = 512;

/// Answers cached for one write generation.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    inner: Mutex<(u64, HashMap<String, Bytes>)>,
}

impl Cache {
    pub(crate) fn get(&self, generation: u64, key: &str) -> Option<Bytes> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (inner.0 == generation)
            .then(|| inner.1.get(key).cloned())
            .flatten()
    }

    pub(crate) fn put(&self, generation: u64, key: String, value: Bytes) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.0 != generation {
            *inner = (generation, HashMap::new());
        }
        if inner.1.len() < MAX_CACHED {
            inner.1.insert(key, value);
        }
    }
}
