use std::io::BufWriter;
use std::process::ExitCode;

use crate::cli::{ExportArgs, ExportFormat};
use crate::config::Config;

pub(crate) fn run(config: &Config, args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger(false)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    match args.format {
        ExportFormat::Jsonl => {
            let count = ledger.export_jsonl(&mut out)?;
            eprintln!("attest: exported {count} entries");
        }
    }
    Ok(ExitCode::SUCCESS)
}
