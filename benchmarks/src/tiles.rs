//! Publishing the ledger as C2SP tlog-tiles and checking it from the files alone.

use std::time::Instant;

use attest_ledger::tiles::{publish, verify_tiles, DirStore, PublishOptions, VerifyTilesOptions};
use attest_ledger::{Ledger, Record, SigningKey};

use crate::measure::{from_times, once, Row};

/// New entries per incremental publish.
const STEP: u64 = 1_000;

/// `publish` of `big` (a checkpointed ledger of `rows` entries) from scratch, then
/// `samples` incremental publishes of [`STEP`] new entries each (only the publish is
/// timed), then `verify --tiles` of the result.
pub(crate) fn rows(
    dir: &tempfile::TempDir,
    big: &Ledger,
    key: &SigningKey,
    record: impl Fn(u64) -> Record,
    samples: usize,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    big.checkpoint(key)?;
    let size = big.tip()?.map_or(0, |(seq, _)| seq);
    let out = dir.path().join("tiles");
    rows.push(once(
        &format!("publish tlog-tiles: {size} entries from scratch (files synced)"),
        || {
            publish(big, &out, PublishOptions::default())?;
            Ok(())
        },
    )?);
    let mut times = Vec::new();
    let mut next = size + 1;
    for _ in 0..samples {
        let records: Vec<Record> = (next..next + STEP).map(&record).collect();
        big.append_batch(&records)?;
        next += STEP;
        big.checkpoint(key)?;
        let start = Instant::now();
        let report = publish(big, &out, PublishOptions::default())?;
        times.push(start.elapsed().as_nanos() as f64);
        anyhow::ensure!(report.size == next - 1, "incremental publish stopped short");
    }
    rows.push(from_times(
        &format!("publish tlog-tiles: {STEP} new entries onto {size} (incremental)"),
        times,
    ));
    let trusted = [key.verifier().clone()];
    let total = next - 1;
    rows.push(once(
        &format!("verify --tiles of {total} entries (signature, every tile, bundle, body, chain)"),
        || {
            let report = verify_tiles(
                &DirStore::new(&out),
                VerifyTilesOptions {
                    trusted: &trusted,
                    ..VerifyTilesOptions::default()
                },
            )?;
            anyhow::ensure!(
                report.is_intact(),
                "published tiles do not verify: {report:?}"
            );
            Ok(())
        },
    )?);
    Ok(rows)
}
