//! A PostgreSQL server restarted under running writers. The test runs a private server
//! (`initdb` in a temporary directory, on a port of its own) and stops it hard
//! (`pg_ctl restart -m immediate`: no shutdown checkpoint, crash recovery on start)
//! while four writers append at `full`; the shared server other tests use is never
//! touched. Writers ride out the restart (their appends retry) or fail closed; every
//! append that returned is in the chain exactly once, and the chain verifies.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use attest_ledger::{Ledger, LedgerOptions};

use crate::postgres::each_acknowledged_once;
use crate::sample_record;

/// The directory of PostgreSQL's programs: `ATTEST_TEST_PG_BIN`, else Debian's newest
/// `/usr/lib/postgresql/*/bin`.
fn pg_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("ATTEST_TEST_PG_BIN") {
        return Some(dir.into());
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists() && bin.join("pg_ctl").exists())
        .collect();
    found.sort_by_key(|bin| {
        bin.parent()
            .and_then(Path::file_name)
            .and_then(|v| v.to_str()?.parse::<u32>().ok())
    });
    found.pop()
}

/// A private server, stopped (and its files removed) when dropped.
struct PrivateServer {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl PrivateServer {
    /// `initdb` and start; `None` (with a note) when PostgreSQL's programs are missing
    /// and `ATTEST_REQUIRE_PEERS` is unset.
    fn start() -> Option<PrivateServer> {
        let Some(bin) = pg_bin() else {
            crate::peers::peer_missing("PostgreSQL's initdb and pg_ctl (ATTEST_TEST_PG_BIN)");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = PrivateServer { bin, dir, port };
        // PostgreSQL refuses to run as root: as root, the files and the server are the
        // `postgres` user's.
        if is_root() {
            run(Command::new("chown")
                .args(["postgres:"])
                .arg(server.dir.path()));
        }
        run(server.command("initdb").args([
            "-D",
            &server.data(),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ]));
        server.pg_ctl(&["start"]);
        Some(server)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// One of PostgreSQL's programs, as the user that owns the files.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }

    /// `pg_ctl ACTION`, waiting for it to finish, on this server's port and directory.
    fn pg_ctl(&self, action: &[&str]) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        run(self
            .command("pg_ctl")
            .args([
                "-D",
                &self.data(),
                "-l",
                &log,
                "-w",
                "-t",
                "60",
                "-o",
                &options,
            ])
            .args(action));
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["-D", &self.data(), "-m", "immediate", "-w", "stop"])
            .output();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

fn run(command: &mut Command) {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_server_restarted_under_writers_loses_and_duplicates_nothing() {
    let Some(server) = PrivateServer::start() else {
        return;
    };
    let url = server.url();
    let ledger = Arc::new(Ledger::open(&url, LedgerOptions::default()).unwrap());
    let restarted = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let ledger = Arc::clone(&ledger);
            let restarted = Arc::clone(&restarted);
            std::thread::spawn(move || {
                let (mut ok, mut failed, mut ok_after) = (Vec::new(), 0u32, 0u32);
                // Appends until well after the restart, so writers cross it.
                let mut n = 0u64;
                let mut after = 0u32;
                while after < 40 {
                    let record = sample_record(1_000_000 * t + n);
                    n += 1;
                    let late = restarted.load(Ordering::SeqCst);
                    match ledger.append(&record) {
                        Ok(_) => {
                            ok.push(record.action_id);
                            ok_after += u32::from(late);
                        }
                        Err(_) => failed += 1,
                    }
                    after += u32::from(late);
                }
                (ok, failed, ok_after)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    server.pg_ctl(&["-m", "immediate", "restart"]);
    restarted.store(true, Ordering::SeqCst);
    let (mut acknowledged, mut failed, mut ok_after) = (Vec::new(), 0, 0);
    for writer in writers {
        let (ok, lost, late) = writer.join().unwrap();
        acknowledged.extend(ok);
        failed += lost;
        ok_after += late;
    }
    // The writers kept going: appends begun after the server came back went through.
    assert!(ok_after > 0, "no append succeeded after the restart");
    let rows = each_acknowledged_once(&url, &acknowledged);
    eprintln!(
        "{} appends acknowledged, {failed} failed closed, across a restart; {rows} rows",
        acknowledged.len()
    );
}
