//! The extractions shared between the machines that build one index (`extraction_cache`).

use super::*;

impl SharedExtractions for PgStore {
    fn location(&self) -> String {
        format!(
            "PostgreSQL schema {:?} (the database in ${})",
            self.config.schema, self.config.url_env
        )
    }

    fn shares_extractions(&self) -> bool {
        true
    }

    fn shared_extractions(
        &self,
        fingerprint: &str,
        chunks: &[kgrag_types::ChunkId],
    ) -> Result<Vec<Extraction>> {
        let fingerprint = fingerprint.to_owned();
        let ids: Vec<String> = chunks.iter().map(|c| c.as_str().to_owned()).collect();
        let (found, unreadable) = self.read(move |client, secrets, s| async move {
            let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
            let (mut out, mut unreadable) = (Vec::new(), 0usize);
            for part in ids.chunks(SHARE_BATCH) {
                for r in client
                    .query(
                        &format!(
                            "select chunk_id, extraction from {s}.extraction_cache where fingerprint = $1 \
                             and chunk_id = any($2)"
                        ),
                        &[&fingerprint, &part],
                    )
                    .await
                    .map_err(secrets.on("reading the shared extractions"))?
                {
                    // A row another version wrote, or one changed by hand, is skipped (extracted
                    // here), as the local store skips an entry it cannot read.
                    let x = col::<String>(&r, 0).and_then(|id| {
                        let v: serde_json::Value = col(&r, 1)?;
                        let x: Extraction = serde_json::from_value(v)?;
                        Ok((id, x))
                    });
                    match x {
                        Ok((id, x)) if wanted.contains(id.as_str()) && x.chunk_id.as_str() == id => {
                            out.push(x)
                        }
                        _ => unreadable += 1,
                    }
                }
            }
            Ok((out, unreadable))
        })?;
        if unreadable > 0 {
            crate::progress::say(&format!(
                "note: {unreadable} shared extractions in {} could not be read; those chunks are extracted \
                 here",
                self.location()
            ));
        }
        Ok(found)
    }

    fn share_extractions(&self, fingerprint: &str, found: &[Extraction]) -> Result<()> {
        if found.is_empty() {
            return Ok(());
        }
        let fingerprint = fingerprint.to_owned();
        let mut rows: Vec<(String, serde_json::Value)> = Vec::with_capacity(found.len());
        for x in found {
            rows.push((x.chunk_id.as_str().to_owned(), serde_json::to_value(x)?));
        }
        // One order for every writer (no deadlock between two machines sharing overlapping chunks).
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        self.read(move |client, secrets, s| async move {
            for part in rows.chunks(SHARE_BATCH) {
                let ids: Vec<&str> = part.iter().map(|(id, _)| id.as_str()).collect();
                let mut present = std::collections::HashSet::new();
                for r in client
                    .query(
                        &format!(
                            "select chunk_id from {s}.extraction_cache where fingerprint = $1 \
                             and chunk_id = any($2)"
                        ),
                        &[&fingerprint, &ids],
                    )
                    .await
                    .map_err(secrets.on("reading the shared extractions"))?
                {
                    present.insert(col::<String>(&r, 0)?);
                }
                let (ids, values): (Vec<&str>, Vec<&serde_json::Value>) = part
                    .iter()
                    .filter(|(id, _)| !present.contains(id))
                    .map(|(id, v)| (id.as_str(), v))
                    .unzip();
                if ids.is_empty() {
                    continue;
                }
                client
                    .execute(
                        &format!(
                            "insert into {s}.extraction_cache (fingerprint, chunk_id, extraction) \
                             select $1, c, x from unnest($2::text[], $3::jsonb[]) as t(c, x) \
                             on conflict do nothing"
                        ),
                        &[&fingerprint, &ids, &values],
                    )
                    .await
                    .map_err(secrets.on("sharing the extractions"))?;
            }
            Ok(())
        })
    }
}
