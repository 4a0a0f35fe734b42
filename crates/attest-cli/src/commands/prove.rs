use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use attest_ledger::{ConsistencyProof, InclusionProof, Ledger, LedgerError};

use crate::cli::{ProveArgs, VerifyProofArgs};
use crate::config::{read_capped, trusted_keys, Config};

pub(crate) fn prove(config: &Config, args: &ProveArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger_read_only()?;
    let mut out = std::io::stdout().lock();
    match (args.consistency, args.seq) {
        (Some(old), _) => {
            let proof = ledger
                .prove_consistency(old, args.size)
                .map_err(|err| with_hint(&ledger, old, args.size, err))?;
            unsigned_note(old, proof.old_checkpoint.is_none());
            unsigned_note(proof.new_size, proof.new_checkpoint.is_none());
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
            let proof = match &args.archive {
                None => ledger.prove_inclusion(seq, args.size),
                Some(path) => {
                    let archive = crate::commands::verify::read_archive(path)?;
                    ledger.prove_inclusion_archived(seq, args.size, &archive)
                }
            }
            .map_err(|err| with_hint(&ledger, seq, args.size, err))?;
            unsigned_note(proof.tree_size, proof.checkpoint.is_none());
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

/// What to run when a seq or size lies beyond the newest checkpoint.
fn with_hint(ledger: &Ledger, asked: u64, size: Option<u64>, err: LedgerError) -> anyhow::Error {
    let LedgerError::OutOfRange { size: tree, .. } = &err else {
        return err.into();
    };
    let tip = ledger.tip().ok().flatten().map_or(0, |(seq, _)| seq);
    let hint = match size {
        None if asked <= tip => format!(
            "the newest checkpoint covers {tree} entries and seq {asked} came later: run \
             `attest checkpoint` to sign the ledger as it is now ({tip} entries), then prove again"
        ),
        _ => format!("the ledger holds {tip} entries"),
    };
    anyhow::Error::new(err).context(hint)
}

/// A proof against a size no checkpoint signs cannot be checked by `verify-proof`: say so.
fn unsigned_note(size: u64, unsigned: bool) {
    if unsigned {
        eprintln!(
            "attest: note: no signed checkpoint covers exactly {size} entries, so `attest verify-proof` \
             will refuse this proof; run `attest checkpoint` and prove against the size it signs"
        );
    }
}

pub(crate) fn verify_proof(args: &VerifyProofArgs) -> anyhow::Result<ExitCode> {
    let bytes = read_capped(&args.file, 1 << 20)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", args.file.display()))?;
    let trusted = trusted_keys(&args.trust)?;
    if trusted.is_empty() {
        anyhow::bail!("no trusted verifier key: pass --vkey, --vkey-file or set ATTEST_VKEY");
    }
    let mut out = std::io::stdout().lock();
    if value.get("old_size").is_some() {
        let proof: ConsistencyProof = serde_json::from_value(value).with_context(|| {
            format!(
                "{} is not a consistency proof (a file holds one kind of proof, with no other fields)",
                args.file.display()
            )
        })?;
        return Ok(match proof.check(&trusted) {
            Ok(()) => {
                writeln!(
                    out,
                    "ok: the signed tree of {} entries is a prefix of the signed tree of {} (signed by {})",
                    proof.old_size,
                    proof.new_size,
                    signer(&trusted, proof.new_checkpoint.as_deref())
                )?;
                ExitCode::SUCCESS
            }
            Err(err) => {
                writeln!(out, "FAILED: {err}")?;
                ExitCode::from(1)
            }
        });
    }
    let proof: InclusionProof = serde_json::from_value(value).with_context(|| {
        format!(
            "{} is not an inclusion proof (a file holds one kind of proof, with no other fields)",
            args.file.display()
        )
    })?;
    Ok(match proof.check(&trusted) {
        Ok(()) => {
            writeln!(
                out,
                "ok: seq {} (hash {}) is in the signed tree of {} entries (signed by {})",
                proof.seq,
                proof.entry_hash,
                proof.tree_size,
                signer(&trusted, proof.checkpoint.as_deref())
            )?;
            ExitCode::SUCCESS
        }
        Err(err) => {
            writeln!(out, "FAILED: {err}")?;
            ExitCode::from(1)
        }
    })
}

/// The trusted key that verified `note`: the one its origin names (a checkpoint verifies
/// only under a key of its origin's name).
fn signer(trusted: &[attest_ledger::VerifierKey], note: Option<&str>) -> String {
    let origin = note
        .and_then(|note| attest_ledger::read_checkpoint_unverified(note.as_bytes()).ok())
        .map(|body| body.origin);
    trusted
        .iter()
        .find(|key| Some(key.name()) == origin.as_deref())
        .map_or_else(|| "a trusted key".to_owned(), ToString::to_string)
}
