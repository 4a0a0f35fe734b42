use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use attest_ledger::{ConsistencyProof, InclusionProof};

use crate::cli::{ProveArgs, VerifyProofArgs};
use crate::config::{read_capped, trusted_keys, Config};

pub(crate) fn prove(config: &Config, args: &ProveArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger(false)?;
    let mut out = std::io::stdout().lock();
    match (args.consistency, args.seq) {
        (Some(old), _) => {
            let proof = ledger.prove_consistency(old, args.size)?;
            if args.json {
                serde_json::to_writer_pretty(&mut out, &proof)?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "the tree of {} entries (root {}) is a prefix of the tree of {} (root {}): {} hashes of proof",
                    proof.old_size, proof.old_root, proof.new_size, proof.new_root, proof.proof.len()
                )?;
            }
        }
        (None, Some(seq)) => {
            let proof = ledger.prove_inclusion(seq, args.size)?;
            if args.json {
                serde_json::to_writer_pretty(&mut out, &proof)?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "seq {} (hash {}) is in the tree of {} entries (root {}): {} hashes of proof{}",
                    proof.seq,
                    proof.entry_hash,
                    proof.tree_size,
                    proof.root,
                    proof.proof.len(),
                    if proof.checkpoint.is_some() {
                        ", signed checkpoint attached"
                    } else {
                        ""
                    }
                )?;
            }
        }
        (None, None) => anyhow::bail!("give a SEQ to prove, or --consistency OLD"),
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn verify_proof(args: &VerifyProofArgs) -> anyhow::Result<ExitCode> {
    let bytes = read_capped(&args.file, 1 << 20)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", args.file.display()))?;
    let mut out = std::io::stdout().lock();
    if value.get("old_size").is_some() {
        let proof: ConsistencyProof = serde_json::from_value(value)
            .with_context(|| format!("{} is not a consistency proof", args.file.display()))?;
        return Ok(match proof.check() {
            Ok(()) => {
                writeln!(
                    out,
                    "ok: the tree of {} entries is a prefix of the tree of {}",
                    proof.old_size, proof.new_size
                )?;
                ExitCode::SUCCESS
            }
            Err(err) => {
                writeln!(out, "FAILED: {err}")?;
                ExitCode::from(1)
            }
        });
    }
    let proof: InclusionProof = serde_json::from_value(value)
        .with_context(|| format!("{} is not an inclusion proof", args.file.display()))?;
    let trusted = trusted_keys(&args.trust)?;
    if trusted.is_empty() {
        anyhow::bail!("no trusted verifier key: pass --vkey, --vkey-file or set ATTEST_VKEY");
    }
    Ok(match proof.check(&trusted) {
        Ok(()) => {
            writeln!(
                out,
                "ok: seq {} (hash {}) is in the signed tree of {} entries",
                proof.seq, proof.entry_hash, proof.tree_size
            )?;
            ExitCode::SUCCESS
        }
        Err(err) => {
            writeln!(out, "FAILED: {err}")?;
            ExitCode::from(1)
        }
    })
}
