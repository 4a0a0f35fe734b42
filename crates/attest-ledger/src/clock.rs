use std::time::SystemTime;

/// Where the ledger gets the time for `ts`; injected so tests can pin it.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// RFC 3339 UTC with microseconds, the form `ts` takes in entries.
pub fn format_ts(time: SystemTime) -> String {
    humantime::format_rfc3339_micros(time).to_string()
}
