//! Approvals that outlive the hook (`attest hook <agent> --approvals attest`): an ask is
//! a durable request; the hook answers "held" (the model reads how to go on); an
//! approver says yes with their token; the same call retried is allowed once and its
//! outcome names the approver; a rejection, an expiry or a changed call is a deny.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use crate::approvals::attest_env;
use crate::hook::hook_answer;
use crate::{exported_entries, stderr, stdout};

const HOOK: &[&str] = &["claude-code", "--approvals", "attest", "--wait", "0"];

/// `attest --ledger ledger.sqlite ARGS` in `dir`, with `env`.
fn attest_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec!["--ledger", "ledger.sqlite"];
    all.extend_from_slice(args);
    attest_env(dir, &all, env)
}

/// Registers an approver on the hook's ledger; returns their token.
fn approver(dir: &Path, name: &str) -> String {
    let out = attest_in(dir, &["approvers", "add", name, "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    added["token"].as_str().unwrap().to_owned()
}

/// `attest confirm ID approve|reject` as the holder of `token`.
fn confirm(dir: &Path, token: &str, id: &str, verdict: &str) {
    let out = attest_in(
        dir,
        &["confirm", id, verdict],
        &[("ATTEST_APPROVER_TOKEN", token)],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// Claude Code's event for a shell command.
fn event(name: &str, command: &str) -> Value {
    json!({
        "session_id": "s-1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": name,
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "toolu_1",
    })
}

/// The hook's ruling before `command`: the decision and its reason.
fn before(dir: &Path, command: &str) -> (String, String) {
    let answer = hook_answer(dir, HOOK, &event("PreToolUse", command), &[]);
    let out = &answer["hookSpecificOutput"];
    (
        out["permissionDecision"].as_str().unwrap().to_owned(),
        out["permissionDecisionReason"].as_str().unwrap().to_owned(),
    )
}

/// The approval id in a "held for approval <id> at <link>" reason.
fn held_id(reason: &str) -> String {
    let rest = reason
        .split("held for approval ")
        .nth(1)
        .unwrap_or_else(|| panic!("not held: {reason}"));
    rest.split(' ').next().unwrap().to_owned()
}

#[test]
fn a_held_call_approved_in_attest_is_allowed_once_when_retried() {
    let dir = tempfile::tempdir().unwrap();
    let token = approver(dir.path(), "alice@acme.com");
    let (decision, reason) = before(dir.path(), "git push origin main");
    assert_eq!(decision, "deny", "{reason}");
    assert!(
        reason.contains("retry the same call after it is approved")
            && reason.contains("http://127.0.0.1:8321"),
        "{reason}"
    );
    let id = held_id(&reason);
    // Retried before anyone decided: still held, the same request.
    let (decision, reason) = before(dir.path(), "git push origin main");
    assert_eq!((decision.as_str(), held_id(&reason)), ("deny", id.clone()));
    let pending = attest_in(dir.path(), &["pending", "--json"], &[]);
    assert!(stdout(&pending).contains(&id), "{}", stdout(&pending));

    confirm(dir.path(), &token, &id, "approve");
    let (decision, reason) = before(dir.path(), "git push origin main");
    assert_eq!(decision, "allow", "{reason}");
    assert!(reason.contains("approved by alice@acme.com"), "{reason}");
    // Once: the same call again is a new request, not the used approval.
    let (decision, again) = before(dir.path(), "git push origin main");
    assert_eq!(decision, "deny");
    let second = held_id(&again);
    assert_ne!(second, id);

    // The call ran: its outcome row uses the approval and names the approver.
    let done = {
        let mut done = event("PostToolUse", "git push origin main");
        done["tool_response"] = json!({"stdout": "", "stderr": "To origin\n"});
        done
    };
    assert_eq!(hook_answer(dir.path(), HOOK, &done, &[]), json!({}));
    let entries = exported_entries(dir.path());
    let outcome = entries
        .iter()
        .find(|e| e["action_id"] == id.as_str() && e["execution"]["status"] == "ok")
        .unwrap_or_else(|| panic!("no outcome for {id}: {entries:?}"));
    assert_eq!(
        outcome["confirm"]["approver"], "alice@acme.com",
        "{outcome}"
    );
    assert_eq!(outcome["decision"], "ask");

    // A changed command is not allowed by an earlier approval: it is held on its own.
    confirm(dir.path(), &token, &second, "approve");
    let (decision, reason) = before(dir.path(), "git push --force origin main");
    assert_eq!(decision, "deny", "{reason}");
    let third = held_id(&reason);
    assert!(third != second && third != id);
}

#[test]
fn a_rejected_call_is_denied_with_the_reason_and_asked_anew() {
    let dir = tempfile::tempdir().unwrap();
    let token = approver(dir.path(), "bob@acme.com");
    let (_, reason) = before(dir.path(), "rm -rf build");
    let id = held_id(&reason);
    confirm(dir.path(), &token, &id, "reject");
    let (decision, reason) = before(dir.path(), "rm -rf build");
    assert_eq!(decision, "deny");
    assert!(
        reason.contains("was not approved") && reason.contains("rejected by bob@acme.com"),
        "{reason}"
    );
    let entries = exported_entries(dir.path());
    let rejected: Vec<&Value> = entries
        .iter()
        .filter(|e| e["confirm"]["outcome"] == "rejected")
        .collect();
    assert_eq!(rejected.len(), 1, "{entries:?}");
    // Trying again asks again.
    let (_, reason) = before(dir.path(), "rm -rf build");
    assert_ne!(held_id(&reason), id);
}

#[test]
fn an_approval_not_used_in_time_expires() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".attest")).unwrap();
    std::fs::write(
        dir.path().join(".attest/config.yaml"),
        "approvals:\n  use_by: 1s\n",
    )
    .unwrap();
    let token = approver(dir.path(), "carol@acme.com");
    let (_, reason) = before(dir.path(), "git push origin main");
    let id = held_id(&reason);
    confirm(dir.path(), &token, &id, "approve");
    std::thread::sleep(Duration::from_millis(1500));
    let (decision, reason) = before(dir.path(), "git push origin main");
    assert_eq!(decision, "deny");
    assert!(reason.contains("expired"), "{reason}");
    let entries = exported_entries(dir.path());
    assert!(
        entries
            .iter()
            .any(|e| e["action_id"] == id.as_str() && e["confirm"]["outcome"] == "expired"),
        "{entries:?}"
    );
}

#[test]
fn the_hook_waits_for_an_approver_up_to_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let token = approver(dir.path(), "dana@acme.com");
    let path = dir.path().to_path_buf();
    let waiting = std::thread::spawn(move || {
        hook_answer(
            &path,
            &["claude-code", "--approvals", "attest", "--wait", "30"],
            &event("PreToolUse", "git push origin main"),
            &[],
        )
    });
    // The request is stored (and announced) before the hook waits.
    let mut tries = 0;
    let id = loop {
        tries += 1;
        assert!(tries < 300, "the hook never stored its request");
        let pending = attest_in(dir.path(), &["pending", "--json"], &[]);
        let list: Value = serde_json::from_str(&stdout(&pending)).unwrap_or(json!([]));
        if let Some(id) = list[0]["id"].as_str() {
            break id.to_owned();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    confirm(dir.path(), &token, &id, "approve");
    let answer = waiting.join().unwrap();
    let out = &answer["hookSpecificOutput"];
    assert_eq!(out["permissionDecision"], "allow", "{answer}");
}

/// Cursor's `preToolUse` cannot ask, so with Attest approvals a file write policy asks
/// about is held; approved and retried, it is allowed once, and its `postToolUse` (the
/// same tool, input and working directory) uses the approval and names the approver.
#[test]
fn a_cursor_file_write_held_and_approved_is_allowed_once_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let token = approver(dir.path(), "erin@acme.com");
    let hook = &["cursor", "--approvals", "attest", "--wait", "0"];
    let tool = |event: &str| {
        json!({
            "hook_event_name": event,
            "conversation_id": "conv-1",
            "generation_id": "gen-1",
            "workspace_roots": ["/home/dev/app"],
            "tool_name": "Write",
            "tool_input": {"file_path": "/home/dev/app/.env", "contents": "KEY=x"},
            "tool_use_id": "abc123",
            "cwd": "/home/dev/app",
        })
    };
    let held = hook_answer(dir.path(), hook, &tool("preToolUse"), &[]);
    assert_eq!(held["permission"], "deny", "{held}");
    let id = held_id(held["agent_message"].as_str().unwrap());
    confirm(dir.path(), &token, &id, "approve");
    let allowed = hook_answer(dir.path(), hook, &tool("preToolUse"), &[]);
    assert_eq!(allowed["permission"], "allow", "{allowed}");
    let mut done = tool("postToolUse");
    done["tool_output"] = json!("{\"success\":true}");
    done["duration"] = json!(8);
    assert_eq!(hook_answer(dir.path(), hook, &done, &[]), json!({}));
    let entries = exported_entries(dir.path());
    let outcome = entries
        .iter()
        .find(|e| e["action_id"] == id.as_str() && e["execution"]["status"] == "ok")
        .unwrap_or_else(|| panic!("no outcome for {id}: {entries:?}"));
    assert_eq!(outcome["confirm"]["approver"], "erin@acme.com", "{outcome}");
    // Once: the same write again is a new request.
    let again = hook_answer(dir.path(), hook, &tool("preToolUse"), &[]);
    assert_eq!(again["permission"], "deny", "{again}");
    assert_ne!(held_id(again["agent_message"].as_str().unwrap()), id);
}

/// The pending hold files of the hook's calls, wherever the hook keeps them (the
/// per-user state directory; before issue 49, beside the ledger in the workspace).
fn hold_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for holds in [dir.join(".hook-state/hook-holds"), dir.join("hook-holds")] {
        for entry in std::fs::read_dir(holds).into_iter().flatten() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".json") && !name.ends_with(".claimed.json") {
                files.push(path);
            }
        }
    }
    files
}

/// A project where `git push origin feature` is held and approved: the directory and
/// the call's hold file.
fn approved_feature_push() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let token = approver(dir.path(), "alice@acme.com");
    let (_, reason) = before(dir.path(), "git push origin feature");
    confirm(dir.path(), &token, &held_id(&reason), "approve");
    let hold = hold_files(dir.path()).pop().expect("a hold file");
    (dir, hold)
}

/// The ledger's last row.
fn last_row(dir: &Path) -> Value {
    exported_entries(dir).pop().unwrap()
}

/// Issue 49's attack: with an approval given for `git push origin feature`, the agent
/// copies that call's hold over the force push's (`cp <approved>.json <other>.json`).
/// The hold is bound to its own call, so the force push is refused and recorded.
#[test]
fn a_hold_copied_to_another_calls_name_is_refused_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let token = approver(dir.path(), "alice@acme.com");
    let (_, reason) = before(dir.path(), "git push origin feature");
    let approved = held_id(&reason);
    let approved_hold = hold_files(dir.path()).pop().expect("a hold file");
    confirm(dir.path(), &token, &approved, "approve");
    let (decision, reason) = before(dir.path(), "git push --force origin main");
    assert_eq!(decision, "deny", "{reason}");
    let other_hold = hold_files(dir.path())
        .into_iter()
        .find(|file| *file != approved_hold)
        .expect("the force push's hold");
    std::fs::copy(&approved_hold, &other_hold).unwrap();
    let (decision, reason) = before(dir.path(), "git push --force origin main");
    assert_eq!(
        decision, "deny",
        "the copied approval let the force push run: {reason}"
    );
    assert!(reason.contains("copied or edited"), "{reason}");
    let row = last_row(dir.path());
    assert_eq!(row["verb"], "delete", "{row}");
    assert_eq!(row["confirm"]["outcome"], "rejected", "{row}");
    assert_eq!(row["confirm"]["channel"], "attest-policy", "{row}");
    assert!(row["confirm"]["note"]
        .as_str()
        .unwrap()
        .contains("copied or edited"));
    // The approved call itself is not spent by the attempt.
    let (decision, reason) = before(dir.path(), "git push origin feature");
    assert_eq!(decision, "allow", "{reason}");
}

/// A hold edited in place (a field added, a token swapped) is refused and recorded.
#[test]
fn an_edited_hold_is_refused_and_recorded() {
    let (dir, hold) = approved_feature_push();
    let mut kept: Value = serde_json::from_slice(&std::fs::read(&hold).unwrap()).unwrap();
    kept["note"] = json!("edited by the agent");
    std::fs::write(&hold, kept.to_string()).unwrap();
    let (decision, reason) = before(dir.path(), "git push origin feature");
    assert_eq!(decision, "deny", "the edited hold was honoured: {reason}");
    assert!(reason.contains("copied or edited"), "{reason}");
    assert_eq!(last_row(dir.path())["confirm"]["outcome"], "rejected");
}

/// An approval is used once: its hold, saved before the call ran and put back after,
/// allows nothing.
#[test]
fn a_used_approval_cannot_be_used_again() {
    let (dir, hold) = approved_feature_push();
    let saved = std::fs::read(&hold).unwrap();
    let (decision, _) = before(dir.path(), "git push origin feature");
    assert_eq!(decision, "allow");
    let mut done = event("PostToolUse", "git push origin feature");
    done["tool_response"] = json!({"stdout": "", "stderr": ""});
    assert_eq!(hook_answer(dir.path(), HOOK, &done, &[]), json!({}));
    std::fs::write(&hold, saved).unwrap();
    let (decision, reason) = before(dir.path(), "git push origin feature");
    assert_eq!(
        decision, "deny",
        "a used approval allowed the call again: {reason}"
    );
}
