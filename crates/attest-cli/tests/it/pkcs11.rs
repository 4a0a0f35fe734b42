//! Signing keys on a PKCS#11 token (issue 52): keygen, checkpoints and witness
//! cosignatures signed by SoftHSM2, checked by `attest verify` and Go's sumdb/note.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::{expect_ok, stderr, stdout, Running};

/// Debian's SoftHSM2 module (package softhsm2).
const MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";
/// The token's user PIN: only ever in a 0600 file the binary is pointed at.
const PIN: &str = "4711-test";

/// A SoftHSM2 token of the test's own (its directory and configuration in `dir`), or
/// `None` after saying so when SoftHSM2 is not installed.
fn token(dir: &Path) -> Option<PathBuf> {
    if !Path::new(MODULE).exists() {
        crate::peer_missing("SoftHSM2 (Debian: softhsm2; .ci/run installs it)");
        return None;
    }
    std::fs::create_dir_all(dir.join("tokens")).unwrap();
    let conf = dir.join("softhsm2.conf");
    std::fs::write(
        &conf,
        format!(
            "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
            dir.join("tokens").display()
        ),
    )
    .unwrap();
    let init = Command::new("softhsm2-util")
        .args([
            "--init-token",
            "--free",
            "--label",
            "attest",
            "--pin",
            PIN,
            "--so-pin",
            "so-4711",
        ])
        .env("SOFTHSM2_CONF", &conf)
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", stderr(&init));
    let pin = dir.join("pin");
    std::fs::write(&pin, PIN).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pin, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    Some(conf)
}

/// The key URI of `object` on the test's token.
fn uri(object: &str) -> String {
    format!("pkcs11:token=attest;object={object}?module-path={MODULE}")
}

/// `attest` in `dir` on its ledger, with the token's configuration and the PIN file.
fn attest_on_token(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_attest"));
    command
        .args(["--ledger".to_owned(), crate::test_ledger(dir)])
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("SOFTHSM2_CONF", dir.join("softhsm2.conf"))
        .env("ATTEST_PKCS11_PIN_FILE", dir.join("pin"));
    command
}

fn run(dir: &Path, args: &[&str]) -> Output {
    attest_on_token(dir, args).output().unwrap()
}

#[test]
fn keygen_checkpoint_witness_and_verify_on_a_softhsm2_token() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_) = token(dir.path()) else { return };
    let log = uri("attest.test/hsm");
    let vkey = expect_ok(&run(dir.path(), &["keygen", "--pkcs11", &log]))
        .trim()
        .to_owned();
    assert!(vkey.starts_with("attest.test/hsm+"), "{vkey}");
    let again = run(dir.path(), &["keygen", "--pkcs11", &log]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    expect_ok(&run(dir.path(), &["demo"]));

    // A witness whose key is on the same token, cosigning the log's checkpoint.
    let witness = uri("witness.test/hsm");
    expect_ok(&run(dir.path(), &["keygen", "--pkcs11", &witness]));
    let wkey = expect_ok(&run(
        dir.path(),
        &["witness", "--key", &witness, "--print-key"],
    ))
    .trim()
    .to_owned();
    let mut server = attest_on_token(
        dir.path(),
        &[
            "witness",
            "--key",
            &witness,
            "--state",
            "w.json",
            "--log-key",
            &vkey,
        ],
    );
    let (_server, first): (Running, String) = crate::start_first_line(&mut server);
    let url = first
        .split(" on ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .to_owned();
    let checkpoint = run(
        dir.path(),
        &[
            "checkpoint",
            "--key",
            &log,
            "--witness",
            &url,
            "--witness-key",
            &wkey,
        ],
    );
    let note = expect_ok(&checkpoint);
    assert!(note.starts_with("attest.test/hsm\n6\n"), "{note}");
    assert!(note.contains("\n\u{2014} attest.test/hsm "), "{note}");
    assert!(note.contains("\n\u{2014} witness.test/hsm "), "{note}");

    let verify = run(dir.path(), &["verify", "--vkey", &vkey]);
    assert!(
        expect_ok(&verify).contains(&format!("signature verified by {vkey}")),
        "{}",
        stdout(&verify)
    );

    // No key file anywhere, and the PIN in no output.
    for output in [&checkpoint, &verify] {
        assert!(!stderr(output).contains(PIN) && !stdout(output).contains(PIN));
    }
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.starts_with(dir.path().join("tokens")) {
            continue;
        } else {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(12).any(|w| w == b"PRIVATE+KEY+"),
                "a key file at {}",
                path.display()
            );
        }
    }
    assert!(!dir.path().join("signing.key").exists());

    // A wrong PIN is refused, naming the login and not the PIN.
    std::fs::write(dir.path().join("pin"), "0000-wrong").unwrap();
    let wrong = run(dir.path(), &["checkpoint", "--key", &log]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(stderr(&wrong).contains("C_Login"), "{}", stderr(&wrong));
    assert!(!stderr(&wrong).contains("0000-wrong"));

    go_opens_the_note(dir.path(), &vkey, &note);
}

/// Go's sumdb/note opens the token-signed checkpoint (and sumdb/tlog checks proofs in it).
fn go_opens_the_note(dir: &Path, vkey: &str, note: &str) {
    let gopath = Path::new("/usr/share/gocode/src/golang.org/x/mod/sumdb/note");
    if Command::new("go").arg("version").output().is_err() || !gopath.exists() {
        crate::peer_missing("Go interop needs `go` and golang.org/x/mod (Debian: golang-go, golang-golang-x-mod-dev)");
        return;
    }
    std::fs::write(dir.join("cp.note"), note).unwrap();
    let inclusion = run(dir, &["prove", "6", "--json"]);
    std::fs::write(dir.join("inclusion.json"), &inclusion.stdout).unwrap();
    let consistency = run(dir, &["prove", "--consistency", "5", "--json"]);
    std::fs::write(dir.join("consistency.json"), &consistency.stdout).unwrap();
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/interop.go");
    let go = Command::new("go")
        .arg("run")
        .arg(&program)
        .args([vkey, "cp.note", "inclusion.json", "consistency.json"])
        .current_dir(dir)
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", dir.join("gocache"))
        .env("HOME", dir)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    assert!(go.status.success(), "{}{}", stdout(&go), stderr(&go));
    assert!(
        stdout(&go).starts_with("ok: note signed by attest.test/hsm"),
        "{}",
        stdout(&go)
    );
}
