//! `ConsoleGate`: ask the person at the terminal (y / n / e for edit).

use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use attest_policy::{params_preview, Action, Verdict};
use serde_json::Value;

use crate::{Gate, GateDecision};

type Io = (Box<dyn BufRead + Send>, Box<dyn Write + Send>);

/// How many unreadable answers before the gate gives up and rejects.
const ATTEMPTS: usize = 3;

/// Asks on a terminal: `y` approves, `n` rejects, `e` approves with edits (a JSON merge
/// patch on the params, checked by policy again). End of input rejects, and so does a
/// standard input that is not a terminal: nobody is there to answer.
pub struct ConsoleGate {
    approver: String,
    io: Option<Arc<Mutex<Io>>>,
}

impl std::fmt::Debug for ConsoleGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleGate")
            .field("approver", &self.approver)
            .finish_non_exhaustive()
    }
}

impl ConsoleGate {
    /// Asks on this process's terminal (prompt on stderr, answer on stdin), recording
    /// answers in `approver`'s name.
    pub fn new(approver: impl Into<String>) -> ConsoleGate {
        ConsoleGate {
            approver: approver.into(),
            io: None,
        }
    }

    /// Asks on `reader` / `writer` instead (treated as interactive).
    pub fn with_io(
        approver: impl Into<String>,
        reader: impl BufRead + Send + 'static,
        writer: impl Write + Send + 'static,
    ) -> ConsoleGate {
        ConsoleGate {
            approver: approver.into(),
            io: Some(Arc::new(Mutex::new((Box::new(reader), Box::new(writer))))),
        }
    }
}

#[async_trait]
impl Gate for ConsoleGate {
    async fn decide(&self, action: &Action, verdict: &Verdict) -> GateDecision {
        let approver = self.approver.clone();
        let prompt = describe(action, verdict);
        let io = self.io.clone();
        let asked = tokio::task::spawn_blocking(move || match io {
            Some(io) => {
                let mut io = io.lock().unwrap_or_else(PoisonError::into_inner);
                let (reader, writer) = &mut *io;
                ask(&approver, &prompt, reader, writer)
            }
            None if std::io::stdin().is_terminal() => ask(
                &approver,
                &prompt,
                &mut std::io::stdin().lock(),
                &mut std::io::stderr().lock(),
            ),
            None => reject(&approver, "standard input is not a terminal: nobody to ask"),
        })
        .await;
        asked.unwrap_or_else(|_| reject(&self.approver, "the console prompt stopped"))
    }
}

fn describe(action: &Action, verdict: &Verdict) -> String {
    let mut text = format!("attest: approval needed\n  action:  {}\n", action.label());
    if let Some(agent) = &action.agent {
        text.push_str(&format!("  agent:   {agent}\n"));
    }
    text.push_str(&format!("  risk:    {}\n", verdict.tier.as_str()));
    for reason in &verdict.reasons {
        text.push_str(&format!("  why:     {reason}\n"));
    }
    let preview = serde_json::to_string(&params_preview(&action.params)).unwrap_or_default();
    text.push_str(&format!("  params:  {preview}\n"));
    if !verdict.approvers.is_empty() {
        text.push_str(&format!(
            "  may approve: {}\n",
            verdict.approvers.join(", ")
        ));
    }
    if verdict.hold {
        text.push_str("  held:    unfilled placeholders; approve with [e]dit\n");
    }
    text
}

fn ask(
    approver: &str,
    prompt: &str,
    reader: &mut dyn BufRead,
    writer: &mut dyn Write,
) -> GateDecision {
    // A prompt that cannot be written is a question nobody saw: reject.
    if writer.write_all(prompt.as_bytes()).is_err() {
        return reject(approver, "cannot write the prompt");
    }
    for _ in 0..ATTEMPTS {
        let Some(answer) = prompt_line(writer, reader, "approve? [y]es / [n]o / [e]dit: ") else {
            return reject(approver, "no answer (end of input)");
        };
        match answer.to_ascii_lowercase().as_str() {
            "y" | "yes" => {
                return GateDecision::Approve {
                    approver: approver.to_owned(),
                    channel: "console".to_owned(),
                }
            }
            "n" | "no" => return reject(approver, "rejected at the console"),
            "e" | "edit" => {
                let Some(text) = prompt_line(
                    writer,
                    reader,
                    "edits (a JSON object merged into the params): ",
                ) else {
                    return reject(approver, "no answer (end of input)");
                };
                match serde_json::from_str::<Value>(&text) {
                    Ok(edits @ Value::Object(_)) => {
                        return GateDecision::Edit {
                            approver: approver.to_owned(),
                            channel: "console".to_owned(),
                            edits,
                            note: None,
                        }
                    }
                    _ => {
                        let _ = writeln!(writer, "not a JSON object; try again");
                    }
                }
            }
            _ => {
                let _ = writeln!(writer, "answer y, n or e");
            }
        }
    }
    reject(approver, "no usable answer")
}

fn prompt_line(writer: &mut dyn Write, reader: &mut dyn BufRead, prompt: &str) -> Option<String> {
    writer.write_all(prompt.as_bytes()).ok()?;
    writer.flush().ok()?;
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

fn reject(approver: &str, note: &str) -> GateDecision {
    GateDecision::Reject {
        approver: approver.to_owned(),
        channel: "console".to_owned(),
        note: Some(note.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use attest_policy::{Decision, Risk, Verb};
    use serde_json::json;

    use super::*;

    fn answer(input: &str) -> GateDecision {
        let action = Action::new("gmail", Verb::Send).with_params(json!({"to": "a@b.c"}));
        let verdict = Verdict::new(Decision::Ask, Risk::High, "R4", "high risk asks");
        let mut out = Vec::new();
        ask(
            "ann",
            &describe(&action, &verdict),
            &mut input.as_bytes(),
            &mut out,
        )
    }

    #[test]
    fn y_approves_n_rejects_e_edits_and_silence_rejects() {
        assert!(matches!(answer("y\n"), GateDecision::Approve { .. }));
        assert!(matches!(answer("no\n"), GateDecision::Reject { .. }));
        assert!(matches!(answer(""), GateDecision::Reject { .. }));
        assert!(matches!(
            answer("maybe\nx\nz\n"),
            GateDecision::Reject { .. }
        ));
        let GateDecision::Edit { edits, .. } = answer("e\n[1]\ne\n{\"to\": \"x@y.z\"}\n") else {
            panic!("expected an edit")
        };
        assert_eq!(edits, json!({"to": "x@y.z"}));
    }
}
