//! The PostgreSQL store's subject keys (see [`crate::erasure`]): one row per tenant and
//! subject's blind index, beside the chain and never in it.

use postgres::GenericClient;

use super::PgStore;
use crate::LedgerError;

impl PgStore {
    /// The key kept under `index`; with `fresh`, stored first unless one is kept.
    pub(crate) fn stored_subject_key(
        &self,
        index: &[u8; 32],
        fresh: Option<&[u8; 32]>,
    ) -> Result<Option<[u8; 32]>, LedgerError> {
        let mut client = self.client()?;
        let subject = &index[..];
        let row = client
            .with(|client| {
                let select = "SELECT key FROM subject_keys WHERE tenant = $1 AND subject = $2";
                // Read first: only a subject's first row writes here.
                let found = client.query_opt(select, &[&self.tenant, &subject])?;
                if found.is_some() {
                    return Ok(found);
                }
                if let Some(fresh) = fresh {
                    client.execute(
                        "INSERT INTO subject_keys (tenant, subject, key) VALUES ($1, $2, $3)
                         ON CONFLICT (tenant, subject) DO NOTHING",
                        &[&self.tenant, &subject, &&fresh[..]],
                    )?;
                }
                client.query_opt(select, &[&self.tenant, &subject])
            })
            .map_err(self.err("reading a subject key"))?;
        row.map(|row| {
            <[u8; 32]>::try_from(row.get::<_, &[u8]>(0))
                .map_err(|_| LedgerError::Internal("a subject key in subject_keys is not 32 bytes"))
        })
        .transpose()
    }

    /// Every key kept for this tenant, by blind index.
    pub(crate) fn all_subject_keys(&self) -> Result<Vec<crate::erasure::KeptKey>, LedgerError> {
        let mut client = self.client()?;
        let rows = client
            .with(|client| {
                client.query(
                    "SELECT subject, key FROM subject_keys WHERE tenant = $1",
                    &[&self.tenant],
                )
            })
            .map_err(self.err("reading the subject keys"))?;
        rows.iter()
            .map(|row| crate::sqlite::subject_pair(row.get::<_, &[u8]>(0), row.get::<_, &[u8]>(1)))
            .collect()
    }

    /// Deletes the key kept under `index`, inside the caller's transaction; none there
    /// is [`LedgerError::SubjectErased`] (the caller does not commit).
    pub(crate) fn forget_subject(
        &self,
        tx: &mut impl GenericClient,
        index: &[u8; 32],
    ) -> Result<(), LedgerError> {
        let deleted = tx
            .execute(
                "DELETE FROM subject_keys WHERE tenant = $1 AND subject = $2",
                &[&self.tenant, &&index[..]],
            )
            .map_err(self.err("deleting a subject key"))?;
        if deleted == 0 {
            return Err(LedgerError::SubjectErased);
        }
        Ok(())
    }
}
