//! Settings that make a program run another command: environment variables (`PAGER`,
//! `GIT_SSH_COMMAND`, `LD_PRELOAD`, …) and git configuration keys (`core.fsmonitor`,
//! `alias.*`, …). A command line that sets one runs whatever the setting names, so it is
//! judged as a command nobody knows (it asks), whatever the program it prefixes.

/// Variables a program reads as a command, a library or code to run, by exact name.
pub(crate) const COMMAND_VARIABLES: [&str; 44] = [
    // The dynamic loader: code loaded into every program.
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    // Where programs are found.
    "PATH",
    // Programs run to show or edit text.
    "PAGER",
    "MANPAGER",
    "GIT_PAGER",
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    // Shells: files sourced and commands run at start-up or at each prompt.
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "IFS",
    // git: programs it runs, and where it finds its configuration and helpers.
    "GIT_SSH",
    "GIT_ASKPASS",
    "GIT_EXEC_PATH",
    "GIT_EXTERNAL_DIFF",
    "GIT_TEMPLATE_DIR",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    // Interpreters: code run before the program, or modules found first.
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    // Build tools: a wrapper run around every compiler call.
    "RUSTC_WRAPPER",
];

/// Variable name beginnings that name a command or configuration (`GIT_CONFIG_KEY_0`,
/// `DYLD_INSERT_LIBRARIES`, `npm_config_script_shell`).
const COMMAND_VARIABLE_PREFIXES: [&str; 6] = [
    "GIT_CONFIG",
    "LD_",
    "DYLD_",
    "NPM_CONFIG_",
    "CARGO_TARGET_",
    "CARGO_BUILD_",
];

/// True when setting the variable `name` can make a program run a command (any name
/// ending in `_COMMAND`, as `GIT_SSH_COMMAND` and `GIT_PROXY_COMMAND` do, included).
pub(crate) fn variable_runs_commands(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    COMMAND_VARIABLES.contains(&upper.as_str())
        || upper.ends_with("_COMMAND")
        || COMMAND_VARIABLE_PREFIXES
            .iter()
            .any(|prefix| upper.starts_with(prefix))
}

/// git configuration keys known to run nothing. Any other key may (`core.fsmonitor`,
/// `core.sshCommand`, `core.pager`, `core.editor`, `core.hooksPath`, `alias.*`,
/// `credential.helper`, `diff.*.textconv`, `filter.*`, `include.path`, …): the list of
/// keys that run commands grows with git, so the riskiest reading is kept for all of them.
const INERT_GIT_KEYS: [&str; 14] = [
    "user.name",
    "user.email",
    "author.name",
    "author.email",
    "committer.name",
    "committer.email",
    "init.defaultbranch",
    "core.quotepath",
    "core.autocrlf",
    "core.safecrlf",
    "core.abbrev",
    "pull.rebase",
    "pull.ff",
    "push.default",
];

/// Sections whose every key only changes how output looks.
const INERT_GIT_SECTIONS: [&str; 3] = ["color.", "advice.", "column."];

/// True when the git configuration key `key` (`core.fsmonitor`, as `-c`, `--config-env`
/// or `git config` name it) can make git run a command.
pub(crate) fn git_key_runs_commands(key: &str) -> bool {
    let key = key.trim().to_ascii_lowercase();
    !(INERT_GIT_KEYS.contains(&key.as_str())
        || INERT_GIT_SECTIONS
            .iter()
            .any(|section| key.starts_with(section)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_and_keys_that_run_commands() {
        for name in [
            "GIT_SSH_COMMAND",
            "GIT_PROXY_COMMAND",
            "git_ssh_command",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_PARAMETERS",
            "LD_PRELOAD",
            "DYLD_INSERT_LIBRARIES",
            "PAGER",
            "EDITOR",
            "BASH_ENV",
            "NODE_OPTIONS",
            "npm_config_script_shell",
        ] {
            assert!(variable_runs_commands(name), "{name}");
        }
        for name in ["FOO", "LANG", "RUST_LOG", "CI", "NODE_ENV", "HOME_DIR"] {
            assert!(!variable_runs_commands(name), "{name}");
        }
        for key in [
            "core.fsmonitor",
            "core.sshCommand",
            "core.pager",
            "alias.st",
            "include.path",
            "diff.x.textconv",
        ] {
            assert!(git_key_runs_commands(key), "{key}");
        }
        for key in ["user.name", "color.ui", "User.Email"] {
            assert!(!git_key_runs_commands(key), "{key}");
        }
    }
}
