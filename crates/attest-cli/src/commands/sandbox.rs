//! `attest sandbox -- CMD`: run a command where the protected set is read-only and
//! Attest's state is out of sight (`attest_core::sandbox`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use attest_core::sandbox::{self, Ids, SandboxPlan};

use crate::cli::{Global, SandboxArgs};
use crate::config::Config;

/// Runs the command in the sandbox, or prints the plan. Runs before anything starts a
/// thread: the kernel gives a new user namespace only to a process with one.
pub(crate) fn run(global: &Global, args: &SandboxArgs) -> anyhow::Result<ExitCode> {
    if let Some(ids) = &args.stage_two {
        return stage_two(ids, &args.command);
    }
    let here = std::env::current_dir()?;
    let project = match &args.project {
        Some(dir) => std::fs::canonicalize(dir)
            .map_err(|err| anyhow::anyhow!("--project {}: {err}", dir.display()))?,
        None => project_of(&here),
    };
    let plan = plan_for(global, &project, &here)?;
    if args.plan {
        print_plan(&project, &plan, args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some((program, rest)) = args.command.split_first() else {
        anyhow::bail!("name the command to run: attest sandbox -- COMMAND [ARGS...]");
    };
    let ids = sandbox::enter(&plan).map_err(|err| {
        anyhow::Error::new(err).context(
            "the sandbox could not be set up, so the command did not run (see `attest \
             sandbox --plan`; user namespaces must be allowed)",
        )
    })?;
    // The first child of the new PID namespace: it locks the mounts, then runs the
    // command (see `stage_two`).
    let exe = std::env::current_exe()?;
    let status = Command::new(exe)
        .arg("sandbox")
        .arg("--stage-two")
        .arg(format!("{}:{}", ids.uid, ids.gid))
        .arg("--")
        .arg(program)
        .args(rest)
        .status()?;
    Ok(exit_code(status))
}

/// The protected set of the configuration that governs `project`, made concrete there.
fn plan_for(global: &Global, project: &Path, here: &Path) -> anyhow::Result<SandboxPlan> {
    // The configuration is read, and its relative paths resolved, where the hook reads
    // it: in the project.
    std::env::set_current_dir(project)?;
    let set = Config::resolve(&global.overrides()).map(|config| config.settings.protected_set());
    std::env::set_current_dir(here)?;
    Ok(SandboxPlan::new(&set?, project))
}

/// The nearest folder at or above `dir` that holds `.attest/` or `.git`, else `dir`.
fn project_of(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|dir| dir.join(".attest").is_dir() || dir.join(".git").exists())
        .unwrap_or(dir)
        .to_path_buf()
}

fn print_plan(project: &Path, plan: &SandboxPlan, json: bool) -> anyhow::Result<()> {
    if json {
        let value = serde_json::json!({ "project": project, "plan": plan });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("project: {}", project.display());
    let lists = [
        ("read-only", &plan.read_only),
        ("hidden", &plan.hidden),
        (
            "absent, not covered (the hook's reading still refuses writes to them)",
            &plan.absent,
        ),
    ];
    for (title, paths) in lists {
        println!("{title}:");
        for path in paths {
            println!("  {}", path.display());
        }
    }
    Ok(())
}

/// In the first process of the sandbox's PID namespace: lock the mounts, run the command
/// as the caller, and answer with its status.
fn stage_two(ids: &str, command: &[std::ffi::OsString]) -> anyhow::Result<ExitCode> {
    // Only the sandbox starts this stage: as the first process of a PID namespace of its
    // own. Run anywhere else (by hand, by an agent) it would act on the real mounts.
    if std::process::id() != 1 {
        anyhow::bail!("--stage-two is the sandbox's own step; run `attest sandbox -- COMMAND`");
    }
    let ids = parse_ids(ids)?;
    sandbox::lock(ids).map_err(|err| {
        anyhow::Error::new(err)
            .context("the sandbox could not be locked, so the command did not run")
    })?;
    let Some((program, rest)) = command.split_first() else {
        anyhow::bail!("no command given");
    };
    let status = Command::new(program)
        .args(rest)
        .status()
        .map_err(|err| anyhow::anyhow!("{}: {err}", Path::new(program).display()))?;
    Ok(exit_code(status))
}

fn parse_ids(text: &str) -> anyhow::Result<Ids> {
    let parsed = text.split_once(':').and_then(|(uid, gid)| {
        Some(Ids {
            uid: uid.parse().ok()?,
            gid: gid.parse().ok()?,
        })
    });
    parsed.ok_or_else(|| anyhow::anyhow!("--stage-two takes UID:GID, not {text:?}"))
}

/// The command's own exit code; a command killed by a signal answers 128 + the signal,
/// as a shell does.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
