//! Reading a generation: the committed manifest, the passage store, the triples, a method's index (its
//! files materialised from the rows, HippoRAG 2's graph rebuilt from its node and edge tables), and sizes.

use super::*;

impl PgStore {
    pub(super) fn read_committed(&self) -> Result<Option<Manifest>> {
        let value: Option<serde_json::Value> = self.read(|client, secrets, s| async move {
            let row = client
                .query_opt(
                    &format!(
                        "select manifest from {s}.generations order by generation desc limit 1"
                    ),
                    &[],
                )
                .await
                .map_err(secrets.on("reading the committed generation"))?;
            row.map(|r| col(&r, 0)).transpose()
        })?;
        value
            .map(|v| {
                let mut manifest: Manifest = serde_json::from_value(v).map_err(|e| {
                    KgragError::Index(format!(
                        "the manifest in {} does not parse ({e}); rebuild with `kgrag index --force`",
                        self.location()
                    ))
                })?;
                manifest.upgrade();
                Ok(manifest)
            })
            .transpose()
    }

    pub(super) fn read_passages(&self, manifest: &Manifest) -> Result<EmbeddingStore> {
        let g = manifest.generation as i64;
        let rows: Vec<(String, String, Vec<f32>)> =
            self.snapshot(manifest.generation, move |client, secrets, s| async move {
                let rows = client
                    .query(
                        &format!(
                            "select chunk_id, body, embedding from {s}.passages where generation = $1 \
                             order by ord"
                        ),
                        &[&g],
                    )
                    .await
                    .map_err(secrets.on("reading the passages"))?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    out.push((col(r, 0)?, col(r, 1)?, col::<Vector>(r, 2)?.to_vec()));
                }
                Ok(out)
            })?;
        if rows.len() != manifest.chunks {
            return Err(self.gone(manifest.generation));
        }
        let dim = rows
            .first()
            .map_or(manifest.embedder.dimension, |r| r.2.len());
        let mut keys = Vec::with_capacity(rows.len());
        let mut texts = Vec::with_capacity(rows.len());
        let mut vectors = Vec::with_capacity(rows.len() * dim);
        for (k, t, v) in rows {
            if v.len() != dim {
                return Err(KgragError::Index(format!(
                    "passage {k} of {} has a {}-d vector, the others {dim}-d",
                    self.location(),
                    v.len()
                )));
            }
            keys.push(k);
            texts.push(Arc::from(t));
            vectors.extend_from_slice(&v);
        }
        Ok(EmbeddingStore::from_stored(
            "passages", keys, texts, dim, vectors,
        )?)
    }

    pub(super) fn read_triples(&self, manifest: &Manifest) -> Result<Vec<Extraction>> {
        let g = manifest.generation as i64;
        self.snapshot(manifest.generation, move |client, secrets, s| async move {
            let rows = client
                .query(
                    &format!(
                        "select extraction from {s}.extractions where generation = $1 order by ord"
                    ),
                    &[&g],
                )
                .await
                .map_err(secrets.on("reading the extractions"))?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push(col::<Json<Extraction>>(r, 0)?.0);
            }
            Ok(out)
        })
    }

    pub(super) fn read_method(
        &self,
        manifest: &Manifest,
        method: &dyn Method,
        env: &Env,
        corpus: &Corpus,
    ) -> Result<Arc<dyn MethodIndex>> {
        let n = FOLDERS.fetch_add(1, Ordering::Relaxed);
        if manifest
            .methods
            .get(method.name())
            .is_some_and(|e| e.files.is_empty())
        {
            // Nothing stored (the dense method's index is the passage store).
            let empty = std::env::temp_dir().join("kgrag-pg-nothing");
            return method.load(&empty, env, corpus);
        }
        // Outside the index directory: a reader needs no right to write there.
        let dir = std::env::temp_dir().join(format!("kgrag-pg-load-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let result = self
            .materialise(manifest, method.name(), &dir.join(method.name()))
            .and_then(|()| method.load(&dir.join(method.name()), env, corpus));
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    pub(super) fn read_sizes(&self, manifest: &Manifest) -> Result<BTreeMap<String, u64>> {
        let g = manifest.generation as i64;
        let parts: Vec<(String, i64)> = self.read(|client, secrets, s| async move {
            let sql = format!(
                "select 'documents', coalesce(sum(pg_column_size(t.*)), 0)::bigint from {s}.documents t where generation = $1
                 union all select 'passages', coalesce(sum(pg_column_size(t.*)), 0)::bigint from {s}.passages t where generation = $1
                 union all select 'extractions', coalesce(sum(pg_column_size(t.*)), 0)::bigint from {s}.extractions t where generation = $1
                 union all select method, sum(b)::bigint from (
                    select method, pg_column_size(t.*) as b from {s}.method_files t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.graph_nodes t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.graph_edges t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.hierarchy_nodes t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.hierarchy_relations t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.communities t where generation = $1) x
                   group by method"
            );
            let rows = client
                .query(&sql, &[&g])
                .await
                .map_err(secrets.on("measuring the generation"))?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push((col(r, 0)?, col(r, 1)?));
            }
            Ok(out)
        })?;
        let mut out: BTreeMap<String, u64> = parts
            .into_iter()
            .map(|(k, v)| (k, v.max(0) as u64))
            .collect();
        for name in manifest.methods.keys() {
            out.entry(name.clone()).or_insert(0);
        }
        Ok(out)
    }

    /// Writes a method's files into `dir`: blobs as stored, graphs rebuilt from their rows and written as
    /// their file; every file is checked against the manifest's checksum.
    pub(super) fn materialise(&self, manifest: &Manifest, method: &str, dir: &Path) -> Result<()> {
        let g = manifest.generation as i64;
        let m = method.to_owned();
        type GraphRows = (
            String,
            (u32, u32),
            Vec<(u32, Node)>,
            Vec<(u32, u32, u32, Edge)>,
        );
        let (blobs, graphs): (Vec<(String, Vec<u8>)>, Vec<GraphRows>) =
            self.snapshot(manifest.generation, move |client, secrets, s| async move {
                let mut blobs = Vec::new();
                for r in client
                    .query(
                        &format!(
                            "select name, data from {s}.method_files where generation = $1 and method = $2 \
                             order by name"
                        ),
                        &[&g, &m],
                    )
                    .await
                    .map_err(secrets.on("reading a method's index"))?
                {
                    blobs.push((col::<String>(&r, 0)?, col::<Vec<u8>>(&r, 1)?));
                }
                let mut graphs = Vec::new();
                for r in client
                    .query(
                        &format!(
                            "select file, node_slots, edge_slots from {s}.graphs where generation = $1 and \
                             method = $2 order by file"
                        ),
                        &[&g, &m],
                    )
                    .await
                    .map_err(secrets.on("reading a graph"))?
                {
                    let file: String = col(&r, 0)?;
                    let slots = |i: usize| -> Result<u32> {
                        u32::try_from(col::<i32>(&r, i)?).map_err(|_| {
                            KgragError::Index(format!("the graph {file} has a negative slot count"))
                        })
                    };
                    let bounds = (slots(1)?, slots(2)?);
                    let mut nodes = Vec::new();
                    for r in client
                        .query(
                            &format!(
                                "select idx, node from {s}.graph_nodes where generation = $1 and method = $2 \
                                 and file = $3 order by idx"
                            ),
                            &[&g, &m, &file],
                        )
                        .await
                        .map_err(secrets.on("reading a graph's nodes"))?
                    {
                        nodes.push((index(col(&r, 0)?)?, col::<Json<Node>>(&r, 1)?.0));
                    }
                    let mut edges = Vec::new();
                    for r in client
                        .query(
                            &format!(
                                "select idx, a, b, edge from {s}.graph_edges where generation = $1 and \
                                 method = $2 and file = $3 order by idx"
                            ),
                            &[&g, &m, &file],
                        )
                        .await
                        .map_err(secrets.on("reading a graph's edges"))?
                    {
                        edges.push((
                            index(col(&r, 0)?)?,
                            index(col(&r, 1)?)?,
                            index(col(&r, 2)?)?,
                            col::<Json<Edge>>(&r, 3)?.0,
                        ));
                    }
                    // More slots than rows is what a hand-edited table looks like: refuse it before
                    // allocating them.
                    if bounds.0 as usize > 4 * nodes.len() + 1_000_000
                        || bounds.1 as usize > 4 * edges.len() + 1_000_000
                    {
                        return Err(KgragError::Index(format!(
                            "the graph {file} claims {} node and {} edge slots for {} nodes and {} edges",
                            bounds.0,
                            bounds.1,
                            nodes.len(),
                            edges.len()
                        )));
                    }
                    graphs.push((file, bounds, nodes, edges));
                }
                Ok((blobs, graphs))
            })?;
        std::fs::create_dir_all(dir).map_err(|source| KgragError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        for (name, bytes) in blobs {
            safe_name(&name)?;
            let path = dir.join(&name);
            std::fs::write(&path, bytes).map_err(|source| KgragError::Io { path, source })?;
        }
        for (file, bounds, nodes, edges) in graphs {
            safe_name(&file)?;
            let graph = KnowledgeGraph::from_rows(bounds, nodes, edges)?;
            graph.save(&dir.join(&file))?;
        }
        let entry = manifest
            .methods
            .get(method)
            .ok_or_else(|| self.gone(manifest.generation))?;
        for f in &entry.files {
            let name = f.path.rsplit('/').next().unwrap_or(&f.path);
            let path = dir.join(name);
            let bytes = std::fs::read(&path).map_err(|_| self.gone(manifest.generation))?;
            let sha = hex::encode(Sha256::digest(&bytes));
            if sha != f.sha256 {
                return Err(KgragError::Index(format!(
                    "{method}/{name} of generation {} in {} does not match its checksum: the rows were \
                     changed outside kgrag; rebuild with `kgrag index --force`",
                    manifest.generation,
                    self.location()
                )));
            }
        }
        Ok(())
    }
}
