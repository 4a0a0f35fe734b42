//! The command line of publishing and watching a ledger (tiles, monitors, witnesses,
//! anchors), as clap structs. Nothing here decides anything.

use std::path::PathBuf;

use clap::Args;

use crate::cli::TrustArgs;

/// Witnesses to ask for cosignatures, and the keys their cosignatures must verify under.
#[derive(Debug, Args)]
pub(crate) struct WitnessClientArgs {
    /// A witness's URL prefix (`add-checkpoint` is posted under it); repeatable.
    #[arg(long = "witness", value_name = "URL")]
    pub(crate) witnesses: Vec<String>,
    /// A witness's cosignature key (`name+id+base64`, type 0x04, from `attest witness
    /// --print-key`); repeatable. Cosignatures under other keys are dropped.
    #[arg(long = "witness-key", value_name = "KEY")]
    pub(crate) witness_keys: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct PublishArgs {
    /// The directory to publish into (created if missing); serve it as static files.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// Publish this note (e.g. a cosigned checkpoint from `attest checkpoint --witness`)
    /// instead of the ledger's newest checkpoint.
    #[arg(long, value_name = "NOTE_FILE")]
    pub(crate) note: Option<PathBuf>,
    /// Print `{"size","previous_size","files","bytes"}`.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct MonitorArgs {
    /// The published log: a URL prefix or a directory.
    #[arg(long, value_name = "URL|DIR")]
    pub(crate) tiles: String,
    /// Where the monitor keeps the last checkpoint it accepted (JSON).
    #[arg(long, value_name = "FILE")]
    pub(crate) state: PathBuf,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
    /// Check once and exit instead of polling.
    #[arg(long)]
    pub(crate) once: bool,
    /// Seconds between polls.
    #[arg(long, default_value_t = 60)]
    pub(crate) interval: u64,
}

#[derive(Debug, Args)]
pub(crate) struct WitnessArgs {
    /// The witness's signing key (an `attest keygen` key file, or a `pkcs11:` key URI; its
    /// name is the witness's name).
    #[arg(long, value_name = "PATH")]
    pub(crate) key: PathBuf,
    /// A log to witness: its verifier key (`name+id+base64`); repeatable.
    #[arg(long = "log-key", value_name = "KEY")]
    pub(crate) log_keys: Vec<String>,
    /// The witness's state: the latest cosigned checkpoint per log (JSON, mode 0600).
    #[arg(long, value_name = "FILE")]
    pub(crate) state: Option<PathBuf>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) host: String,
    /// The port (0 picks a free one; the address is printed).
    #[arg(long, default_value_t = 0)]
    pub(crate) port: u16,
    /// Print the witness's cosignature verifier key and exit.
    #[arg(long)]
    pub(crate) print_key: bool,
}
