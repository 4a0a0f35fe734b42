use std::io::Write;
use std::process::ExitCode;

use attest_policy::{lint, run_cases, MAX_POLICY_BYTES};

use crate::cli::{PolicyCheckArgs, PolicyCommand, PolicyTestArgs};
use crate::config::{load_policy, read_text};

pub(crate) fn run(command: &PolicyCommand) -> anyhow::Result<ExitCode> {
    match command {
        PolicyCommand::Check(args) => check(args),
        PolicyCommand::Test(args) => test(args),
    }
}

fn check(args: &PolicyCheckArgs) -> anyhow::Result<ExitCode> {
    let text = read_text(&args.file, MAX_POLICY_BYTES as u64)?;
    let problems = lint(&text, &args.file.display().to_string());
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &problems)?;
        writeln!(out)?;
    } else if problems.is_empty() {
        writeln!(out, "{}: ok", args.file.display())?;
    } else {
        for problem in &problems {
            writeln!(out, "{problem}")?;
        }
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn test(args: &PolicyTestArgs) -> anyhow::Result<ExitCode> {
    let policy = load_policy(&args.file)?;
    let cases = read_text(&args.cases, MAX_POLICY_BYTES as u64)?;
    let report = run_cases(&policy, &cases, &args.cases.display().to_string())?;
    write!(std::io::stdout().lock(), "{report}")?;
    Ok(if report.all_passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
