//! The dense strategy's search of a generation's passage vectors with pgvector: an HNSW index where the
//! commit built one, else an exact scan that also returns the range of every cosine.

use super::*;

impl PgStore {
    pub(super) fn search_of(&self, manifest: &Manifest) -> Result<Option<Arc<dyn PassageSearch>>> {
        if manifest.chunks == 0 {
            return Ok(None);
        }
        let g = manifest.generation;
        let name = hnsw_name(g);
        let schema = self.config.schema.clone();
        let hnsw: bool = self.read(|client, secrets, _| async move {
            let row = client
                .query_opt(
                    "select 1 from pg_indexes where schemaname = $1 and indexname = $2",
                    &[&schema, &name],
                )
                .await
                .map_err(secrets.on("looking for the HNSW index"))?;
            Ok(row.is_some())
        })?;
        // HNSW searches get a session of their own, set once: the index always (no scan or sort: a small
        // table would otherwise be scanned and sorted, which is exact, not what was asked for), its
        // ef_search, and strict-order
        // iterative scans so that a limit above ef_search is still filled in distance order.
        let client = if hnsw {
            let (db, secrets) = (self.db.clone(), self.secrets.clone());
            let ef = self.tuning().hnsw_ef_search;
            Arc::new(block(&self.handle, async move {
                let client = connect(&db, "kgrag hnsw reader", &secrets).await?;
                client
                    .batch_execute(&format!(
                        "set enable_seqscan = off; set enable_sort = off; set hnsw.ef_search = {ef}; \
                         set hnsw.iterative_scan = strict_order; set jit = off"
                    ))
                    .await
                    .map_err(secrets.on("setting up the HNSW session"))?;
                Ok(client)
            })?)
        } else {
            self.reader()?
        };
        Ok(Some(Arc::new(PgSearch {
            client,
            _runtime: self.runtime.clone(),
            handle: self.handle.clone(),
            secrets: self.secrets.clone(),
            s: self.s(),
            generation: g,
            hnsw,
        })))
    }
}

/// The dense strategy's search of one generation's passage vectors with pgvector.
struct PgSearch {
    client: Arc<Client>,
    /// Keeps the runtime (and the connection's task) alive as long as the search.
    _runtime: Arc<Runtime>,
    handle: tokio::runtime::Handle,
    secrets: Secrets,
    s: String,
    generation: u64,
    hnsw: bool,
}

#[async_trait]
#[async_trait]
impl PassageSearch for PgSearch {
    async fn nearest(&self, query: &[f32], k: usize) -> Result<Option<Nearest>> {
        let (client, secrets, s) = (self.client.clone(), self.secrets.clone(), self.s.clone());
        let (g, hnsw, dim) = (self.generation as i64, self.hnsw, query.len());
        let limit = k.max(1) as i64;
        let q = Vector::from(query.to_vec());
        let (tx, rx) = futures_channel::oneshot::channel();
        self.handle.spawn(async move {
            let out = async {
                let e = |err| secrets.err("searching the passage vectors", err);
                let mut hits = Vec::new();
                let mut range = None;
                if hnsw {
                    // The partial expression index of this generation: the generation and the dimension
                    // are literals of the query, as in the index's definition.
                    for r in client
                        .query(
                            &format!(
                                "select ord, 1 - (embedding::public.vector({dim}) operator(public.<=>) \
                                 $1::public.vector({dim})) from {s}.passages where generation = {g} \
                                 order by embedding::public.vector({dim}) operator(public.<=>) \
                                 $1::public.vector({dim}) limit $2"
                            ),
                            &[&q, &limit],
                        )
                        .await
                        .map_err(e)?
                    {
                        hits.push((index(col(&r, 0)?)? as usize, col::<f64>(&r, 1)?));
                    }
                } else {
                    // Every passage's cosine, the best k returned with the range of all of them (the
                    // in-memory search normalises by it).
                    for r in client
                        .query(
                            &format!(
                                "select ord, c, min(c) over (), max(c) over () from (select ord, \
                                 1 - (embedding operator(public.<=>) $1) as c from {s}.passages \
                                 where generation = $2) t order by c desc, ord limit $3"
                            ),
                            &[&q, &g, &limit],
                        )
                        .await
                        .map_err(e)?
                    {
                        hits.push((index(col(&r, 0)?)? as usize, col::<f64>(&r, 1)?));
                        range = Some((col::<f64>(&r, 2)?, col::<f64>(&r, 3)?));
                    }
                }
                Ok::<_, KgragError>(Nearest { hits, range })
            }
            .await;
            let _ = tx.send(out);
        });
        let found = rx
            .await
            .map_err(|_| KgragError::Database("the database task stopped".into()))??;
        if found.hits.is_empty() {
            // Replaced and removed since it was opened (a generation with passages has rows).
            return Ok(None);
        }
        Ok(Some(found))
    }
}
