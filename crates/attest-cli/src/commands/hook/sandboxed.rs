//! Shell commands run below their text (issue 49): with `hook.sandbox: true`, where the
//! agent lets its hook rewrite a call (Claude Code's `updatedInput`), a shell command the
//! hook lets run is rewritten to run inside `attest sandbox`, where every protected path
//! is read-only and Attest's state is out of sight however the command spells a write
//! (`cd`, a symlink, `python3 -c`, a script). Every shell command's row says whether it
//! runs so (`call.sandboxed`), so one that runs unsandboxed is visible.
//!
//! The rewritten command is `'<attest>' sandbox --project '<project>' -- sh -c
//! '<original>'`, each part in single quotes (a `'` inside closed, escaped and reopened),
//! so the original's text — hostile, written by the model — is one argument to `sh -c`
//! and nothing of it reaches the outer shell. The agent reports the call after it ran in
//! that form; it is read back to the original (only when it is exactly the form written
//! here), so the after-event describes the same call as the one decided.

use std::path::Path;

use serde_json::Value;

use super::event::{Contract, ToolCall};

/// How one event's shell command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sandboxing {
    /// The command runs inside `attest sandbox` (or ran there, for an after-event).
    pub(crate) sandboxed: bool,
}

/// For a shell call (`Bash`, in `detect`'s vocabulary, for every agent): whether it runs
/// sandboxed. A command in the rewritten form is read back to its original first (the
/// after-event of a rewritten call, or a model that typed the form itself; either way it
/// runs in the sandbox). `None` for any other tool.
pub(crate) fn prepare(
    call: &mut ToolCall,
    contract: &dyn Contract,
    enabled: bool,
    exe: &Path,
    project: &Path,
) -> Option<Sandboxing> {
    if call.tool != "Bash" {
        return None;
    }
    let original = command(call).and_then(|command| unwrap(exe, project, command));
    let unwrapped = original.is_some();
    if let Some(original) = original {
        for input in [&mut call.input, &mut call.params] {
            if let Some(object) = input.as_object_mut() {
                object.insert("command".to_owned(), Value::String(original.clone()));
            }
        }
    }
    Some(Sandboxing {
        sandboxed: unwrapped || (enabled && contract.rewrites_input(call)),
    })
}

/// The call's input with its command rewritten to run inside `attest sandbox`; `None`
/// when it has no command string.
pub(crate) fn rewritten_input(call: &ToolCall, exe: &Path, project: &Path) -> Option<Value> {
    let wrapped = wrap(exe, project, command(call)?)?;
    let mut input = call.params.clone();
    input
        .as_object_mut()?
        .insert("command".to_owned(), Value::String(wrapped));
    Some(input)
}

fn command(call: &ToolCall) -> Option<&str> {
    call.params.get("command").and_then(Value::as_str)
}

/// `command` run by `sh -c` inside `attest sandbox` for `project`; `None` when a path is
/// not UTF-8 (it could not be written into the command line faithfully).
fn wrap(exe: &Path, project: &Path, command: &str) -> Option<String> {
    Some(format!(
        "{} sandbox --project {} -- sh -c {}",
        quote(exe.to_str()?),
        quote(project.to_str()?),
        quote(command)
    ))
}

/// The original command of a rewritten one: only a command exactly in [`wrap`]'s form
/// (the same program and project, the rest one quoted word that quotes back the same).
fn unwrap(exe: &Path, project: &Path, command: &str) -> Option<String> {
    let prefix = format!(
        "{} sandbox --project {} -- sh -c ",
        quote(exe.to_str()?),
        quote(project.to_str()?)
    );
    let original = unquote(command.strip_prefix(&prefix)?)?;
    (quote(&original) == command[prefix.len()..]).then_some(original)
}

/// `text` as one single-quoted shell word.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The text of one word made only of single-quoted parts and `\'`; `None` for anything
/// else.
fn unquote(word: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = word;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix(r"\'") {
            out.push('\'');
            rest = after;
            continue;
        }
        let inner = rest.strip_prefix('\'')?;
        let end = inner.find('\'')?;
        out.push_str(&inner[..end]);
        rest = &inner[end + 1..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_command_is_one_word_and_reads_back_exactly() {
        let exe = Path::new("/opt/at'test/attest");
        let project = Path::new("/home/dev/my app");
        for command in [
            "echo hi",
            "it's; rm -rf / #",
            "'",
            "''",
            r"\'",
            "$(touch x) `id` \"$HOME\" \n next line",
            "",
        ] {
            let wrapped = wrap(exe, project, command).unwrap();
            assert_eq!(unwrap(exe, project, &wrapped).as_deref(), Some(command));
            // The shell reads the word back as the command itself.
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "printf %s {}",
                    &wrapped[wrapped.find(" -- sh -c ").unwrap() + 10..]
                ))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), command);
        }
    }

    #[test]
    fn only_the_exact_form_reads_back() {
        let exe = Path::new("/bin/attest");
        let project = Path::new("/p");
        let wrapped = wrap(exe, project, "ls").unwrap();
        assert_eq!(unwrap(exe, project, &wrapped).as_deref(), Some("ls"));
        for other in [
            format!("{wrapped}; rm -rf x"),
            wrapped.replace("'/p'", "'/q'"),
            wrapped.replace("'/bin/attest'", "'/tmp/attest'"),
            "'/bin/attest' sandbox --project '/p' -- sh -c ls".to_owned(),
            "'/bin/attest' sandbox --project '/p' -- sh -c 'a'b".to_owned(),
        ] {
            assert_eq!(unwrap(exe, project, &other), None, "{other}");
        }
    }
}
