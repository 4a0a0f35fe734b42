//! What a call writes, as paths to judge: a coding agent's shell command or file tool,
//! or a filesystem-style tool's path arguments.

use std::path::Path;

use serde_json::Value;

use super::{Protected, ProtectedSet};
use crate::detect::written_paths;

/// The arguments of a filesystem-style tool that name paths it writes (the reference MCP
/// filesystem server's `path`, `source`, `destination`; other servers' spellings).
const PATH_ARGUMENTS: [&str; 9] = [
    "path",
    "paths",
    "source",
    "destination",
    "file_path",
    "filePath",
    "target",
    "directory",
    "dir",
];

impl ProtectedSet {
    /// The first protected path a coding agent's tool call writes: a shell command's
    /// (`Bash` `command`, run in `cwd`, or in its `dir_path` under it as Gemini CLI
    /// sends it), a file tool's `file_path`, of `input` and of every other reading.
    /// `mcp_writes`: the call is an MCP tool that does not only read, judged by its path
    /// arguments.
    pub fn coding_agent_writes(
        &self,
        tool: &str,
        inputs: &[&Value],
        cwd: Option<&Path>,
        mcp_writes: bool,
    ) -> Option<Protected> {
        inputs.iter().find_map(|input| {
            let text = |key: &str| input.get(key).and_then(Value::as_str);
            match tool {
                "Bash" => {
                    let dir = match text("dir_path") {
                        Some(sub) => match super::resolve(sub, cwd, self.home.as_deref()) {
                            Some(dir) => Some(dir),
                            None => {
                                return Some(unresolved(sub));
                            }
                        },
                        None => cwd.map(Path::to_path_buf),
                    };
                    self.shell_writes(text("command").unwrap_or_default(), dir.as_deref())
                }
                "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => {
                    let path = text("file_path").or_else(|| text("notebook_path"));
                    self.judge(path.unwrap_or_default(), cwd)
                }
                _ if mcp_writes => self.tool_writes(input, cwd),
                _ => None,
            }
        })
    }

    /// The first protected path a shell command line writes, run in `cwd`.
    pub fn shell_writes(&self, command: &str, cwd: Option<&Path>) -> Option<Protected> {
        written_paths(command, cwd, self.home.as_deref())
            .into_iter()
            .find_map(|written| match written {
                Ok(path) => self.judge_resolved(&path).map(|why| Protected {
                    path: path.display().to_string(),
                    why,
                }),
                Err(text) => Some(unresolved(&text)),
            })
    }

    /// The first protected path among a filesystem-style tool's path arguments (in
    /// `cwd`, the directory relative paths are read in).
    pub fn tool_writes(&self, arguments: &Value, cwd: Option<&Path>) -> Option<Protected> {
        PATH_ARGUMENTS
            .iter()
            .filter_map(|key| arguments.get(*key))
            .flat_map(|value| match value {
                Value::Array(items) => items.iter().collect::<Vec<_>>(),
                other => vec![other],
            })
            .find_map(|value| match value {
                Value::String(path) => self.judge(path, cwd),
                Value::Null => None,
                // A path that is not a string cannot be read: the riskiest reading.
                other => Some(unresolved(&other.to_string())),
            })
    }
}

fn unresolved(text: &str) -> Protected {
    Protected {
        path: text.to_owned(),
        why: "the path cannot be resolved before it runs, so it is read as the riskiest \
              path there is",
    }
}
