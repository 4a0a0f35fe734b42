//! Keeping PostgreSQL's blocking client off an async runtime.
//!
//! The `postgres` client runs every call, and the close of every connection, on a
//! runtime of its own (`block_on`), which tokio refuses on a thread that is already
//! in a runtime: called from a task, it panics. So every call into the client goes
//! through [`off_runtime`], and every value whose drop talks to the server (a pool, a
//! connection, a transaction) is [`Held`], which drops it the same way. On a thread
//! outside any runtime (the CLI, a writer thread) the call runs where it is, at no
//! cost; on a runtime's thread it runs on a scoped thread of its own, so a caller in
//! async code can use every public call of a PostgreSQL ledger.

/// Runs `work` where a blocking client may block: here, unless this thread is in a
/// tokio runtime, in which case on a thread of its own (the caller waits).
pub fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return work();
    }
    std::thread::scope(|scope| match scope.spawn(work).join() {
        Ok(value) => value,
        // The work's own panic, carried to the caller as it was.
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// A value whose use and drop talk to the server: used and dropped off the runtime.
pub(crate) struct Held<T: Send>(Option<T>);

impl<T: Send> Held<T> {
    pub(crate) fn new(value: T) -> Held<T> {
        Held(Some(value))
    }

    /// Runs `work` on the value, off the runtime.
    pub(crate) fn with<'s, R: Send>(&'s mut self, work: impl FnOnce(&'s mut T) -> R + Send) -> R {
        let value = self.value();
        off_runtime(move || work(value))
    }

    /// Consumes the value with `work` (a commit), off the runtime.
    pub(crate) fn finish<R: Send>(mut self, work: impl FnOnce(T) -> R + Send) -> R {
        match self.0.take() {
            Some(value) => off_runtime(move || work(value)),
            None => unreachable!("a held value is only taken by finish or drop"),
        }
    }

    /// The value, for a use that does not reach the server.
    pub(crate) fn value(&mut self) -> &mut T {
        match self.0.as_mut() {
            Some(value) => value,
            None => unreachable!("a held value is only taken by finish or drop"),
        }
    }
}

impl<T: Send + Clone> Clone for Held<T> {
    fn clone(&self) -> Held<T> {
        Held(self.0.clone())
    }
}

impl<T: Send> std::ops::Deref for Held<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self.0.as_ref() {
            Some(value) => value,
            None => unreachable!("a held value is only taken by finish or drop"),
        }
    }
}

impl<T: Send> std::ops::DerefMut for Held<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value()
    }
}

impl<T: Send> Drop for Held<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            off_runtime(move || drop(value));
        }
    }
}

/// The calls a transaction makes, each off the runtime.
impl<'c> Held<postgres::Transaction<'c>> {
    pub(crate) fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<u64, postgres::Error> {
        self.with(|tx| tx.execute(sql, params))
    }

    pub(crate) fn commit(self) -> Result<(), postgres::Error> {
        self.finish(|tx| tx.commit())
    }
}

/// The calls a pooled connection makes, each off the runtime.
impl Held<super::Conn> {
    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, postgres::Error> {
        self.with(|client| client.query(sql, params))
    }

    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Option<postgres::Row>, postgres::Error> {
        self.with(|client| client.query_opt(sql, params))
    }

    pub(crate) fn transaction(
        &mut self,
    ) -> Result<Held<postgres::Transaction<'_>>, postgres::Error> {
        self.with(|client| client.transaction()).map(Held::new)
    }
}
