//! Writing a generation: one transaction with its rows (documents, passages and vectors, extractions,
//! HippoRAG 2's graph, method files and the SQL projections of the layers and communities), its
//! `generations` row last; then the clean-up of replaced generations.

use super::*;

impl PgStore {
    pub(super) fn commit_generation(&self, new: NewGeneration<'_>) -> Result<Manifest> {
        let n = FOLDERS.fetch_add(1, Ordering::Relaxed);
        check_storable(&new)?;
        let stage = std::env::temp_dir().join(format!("kgrag-pg-stage-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&stage);
        std::fs::create_dir_all(&stage).map_err(|source| KgragError::Io {
            path: stage.clone(),
            source,
        })?;
        // The generation is streamed from borrows: a thread of its own with a runtime of its own.
        let result = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|source| KgragError::Io {
                            path: stage.clone(),
                            source,
                        })?;
                    rt.block_on(self.write(&new, &stage))
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(KgragError::Database(
                        "the commit's thread panicked".to_owned(),
                    ))
                })
        });
        let _ = std::fs::remove_dir_all(&stage);
        result
    }

    /// Writes `new` in one transaction on a connection of its own (in a thread with its own runtime, so
    /// that the generation's data is streamed from borrows).
    pub(super) async fn write(&self, new: &NewGeneration<'_>, stage: &Path) -> Result<Manifest> {
        let s = self.s();
        let secrets = &self.secrets;
        let mut client = connect(&self.db, "kgrag writer", secrets).await?;
        let tx = client
            .transaction()
            .await
            .map_err(secrets.on("starting the commit"))?;
        tx.batch_execute(&format!(
            "set local search_path = {s}, public; lock table {s}.generations in exclusive mode"
        ))
        .await
        .map_err(secrets.on("locking the generations"))?;
        let head: Option<i64> = col(
            &tx.query_one(&format!("select max(generation) from {s}.generations"), &[])
                .await
                .map_err(secrets.on("reading the committed generation"))?,
            0,
        )?;
        let head = head.map(|g| g as u64);
        if let (Some(head), Some(mine)) = (head, new.opened) {
            if head != mine {
                return Err(KgragError::Index(format!(
                    "{} changed while this change was being built (generation {mine} was opened, {head} is \
                     committed now); nothing was written — run the command again",
                    self.location()
                )));
            }
        }
        let generation = head.unwrap_or(0).max(new.opened.unwrap_or(0)) + 1;
        let g = generation as i64;
        // Leftovers of this number (none: a failed transaction leaves nothing; a generation number is
        // reused only after a forced rebuild removed its row) go first.
        for t in GENERATION_TABLES {
            tx.execute(&format!("delete from {s}.{t} where generation = $1"), &[&g])
                .await
                .map_err(secrets.on("clearing the generation"))?;
        }
        let mut manifest = new.manifest.clone();
        manifest.generation = generation;
        manifest.files = Vec::new();

        // Documents.
        {
            let mut copy = Copy::start(&tx, &format!("copy {s}.documents (generation, ord, id, doc_id, title, source, chunks) from stdin binary"), &[
                Type::INT8,
                Type::INT4,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT_ARRAY,
            ], "writing the documents", secrets).await?;
            for (i, d) in manifest.documents.iter().enumerate() {
                let chunks: Vec<&str> = d.chunks.iter().map(|c| c.as_str()).collect();
                let ord = i as i32;
                copy.row(&[
                    &g,
                    &ord,
                    &d.id,
                    &d.doc_id.as_str(),
                    &d.title,
                    &d.source,
                    &chunks,
                ])
                .await?;
            }
            copy.finish().await?;
        }

        // Passages with their vectors.
        let vector_type = tx
            .prepare("select $1::public.vector")
            .await
            .map_err(secrets.on("looking up the vector type"))?
            .params()
            .first()
            .cloned()
            .ok_or_else(|| KgragError::Database("the vector type has no parameter".into()))?;
        let dim = new.passages.dim().unwrap_or(0);
        {
            let mut copy = Copy::start(&tx, &format!("copy {s}.passages (generation, ord, chunk_id, body, embedding) from stdin binary"), &[
                Type::INT8,
                Type::INT4,
                Type::TEXT,
                Type::TEXT,
                vector_type.clone(),
            ], "writing the passages", secrets).await?;
            let data = match new.passages.index() {
                Some(i) => i.values()?,
                None => Default::default(),
            };
            for (row, (key, text)) in new.passages.keys().zip(new.passages.texts()).enumerate() {
                let v = Vector::from(data[row * dim..(row + 1) * dim].to_vec());
                let ord = row as i32;
                let body: &str = text;
                copy.row(&[&g, &ord, &key, &body, &v]).await?;
            }
            copy.finish().await?;
        }

        // Extractions.
        {
            let mut copy = Copy::start(&tx, &format!("copy {s}.extractions (generation, ord, chunk_id, extraction) from stdin binary"), &[Type::INT8, Type::INT4, Type::TEXT, Type::JSONB], "writing the extractions", secrets).await?;
            for (i, x) in new.triples.iter().enumerate() {
                let ord = i as i32;
                copy.row(&[&g, &ord, &x.chunk_id.as_str(), &Json(x)])
                    .await?;
            }
            copy.finish().await?;
        }

        // Each method's index: its graphs as rows, its other files as checksummed blobs.
        for (name, index) in new.methods {
            let mdir = stage.join(name);
            std::fs::create_dir_all(&mdir).map_err(|source| KgragError::Io {
                path: mdir.clone(),
                source,
            })?;
            let saved = index.save(&mdir)?;
            let graphs = index.graphs()?;
            let mut files = Vec::new();
            for f in saved {
                let path = mdir.join(&f);
                let bytes = std::fs::read(&path).map_err(|source| KgragError::Io {
                    path: path.clone(),
                    source,
                })?;
                let sha = hex::encode(Sha256::digest(&bytes));
                files.push(FileEntry {
                    path: format!("{name}/{f}"),
                    bytes: bytes.len() as u64,
                    sha256: sha.clone(),
                });
                if let Some((_, graph)) = graphs.iter().find(|(file, _)| *file == f) {
                    write_graph(&tx, &s, g, name, &f, graph, secrets).await?;
                } else {
                    tx.execute(
                        &format!(
                            "insert into {s}.method_files (generation, method, name, sha256, data) \
                             values ($1, $2, $3, $4, $5)"
                        ),
                        &[&g, name, &f, &sha, &bytes],
                    )
                    .await
                    .map_err(secrets.on("writing a method's index"))?;
                }
                let _ = std::fs::remove_file(&path);
            }
            if let Some(entry) = manifest.methods.get_mut(name) {
                entry.files = files;
            }
            write_projections(&tx, &s, g, name, index.as_ref(), secrets).await?;
        }

        // The HNSW index of this generation's vectors, from the threshold up (pgvector indexes `vector`
        // up to 2,000 dimensions; above, the search stays exact).
        if dim > HNSW_MAX_DIM && new.passages.len() >= self.tuning().hnsw_min_rows {
            crate::progress::say(&format!(
                "note: no HNSW index: pgvector indexes at most {HNSW_MAX_DIM} dimensions, the passage vectors \
                 have {dim}; the dense strategy searches them exactly"
            ));
        }
        if dim > 0 && dim <= HNSW_MAX_DIM && new.passages.len() >= self.tuning().hnsw_min_rows {
            tx.batch_execute(&format!(
                "create index {name} on {s}.passages using hnsw ((embedding::public.vector({dim})) \
                 public.vector_cosine_ops) with (m = {m}, ef_construction = {ef}) where generation = {g}",
                name = hnsw_name(generation),
                m = self.tuning().hnsw_m,
                ef = self.tuning().hnsw_ef_construction,
            ))
            .await
            .map_err(secrets.on("building the HNSW index"))?;
        }

        if let Some(ms) = std::env::var("KGRAG_TEST_PG_STALL_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            // Tests kill the server here, inside the transaction, every row written.
            eprintln!("kgrag: test stall: generation {generation} written, not committed");
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }

        let json = serde_json::to_value(&manifest)?;
        tx.execute(
            // The commit's own time (now() would be the transaction's start): the grace period of the
            // generation it replaces counts from here.
            &format!(
                "insert into {s}.generations (generation, manifest, committed_at) \
                 values ($1, $2, clock_timestamp())"
            ),
            &[&g, &json],
        )
        .await
        .map_err(secrets.on("writing the manifest"))?;
        tx.commit()
            .await
            .map_err(secrets.on("committing the generation"))?;

        // Committed. The clean-up below only frees space: its failure is a note, not an error.
        if let Err(err) = self.remove_replaced(&mut client, g).await {
            crate::progress::say(&format!(
                "note: generation {generation} is committed, but removing old generations failed ({err}); \
                 the next commit tries again"
            ));
        }
        Ok(manifest)
    }

    /// Removes the generations before the previous one (`committed - 1`) that were replaced longer than
    /// `replaced_grace_secs` ago, in one transaction (their `generations` rows first, so no reader starts
    /// on them), then their HNSW indexes (concurrently: readers are not blocked).
    pub(super) async fn remove_replaced(&self, client: &mut Client, committed: i64) -> Result<()> {
        let s = self.s();
        let secrets = &self.secrets;
        let grace = self.tuning().replaced_grace_secs as f64;
        let tx = client
            .transaction()
            .await
            .map_err(secrets.on("starting the clean-up"))?;
        let mut old: Vec<i64> = Vec::new();
        for r in tx
            .query(
                &format!(
                    "select o.generation from {s}.generations o where o.generation < $1 and exists \
                     (select 1 from {s}.generations n where n.generation > o.generation \
                      and n.committed_at <= clock_timestamp() - make_interval(secs => $2))"
                ),
                &[&(committed - 1), &grace],
            )
            .await
            .map_err(secrets.on("listing old generations"))?
        {
            old.push(col(&r, 0)?);
        }
        if old.is_empty() {
            return Ok(());
        }
        let mut tables = GENERATION_TABLES.to_vec();
        tables.rotate_right(1); // `generations` first
        for t in tables {
            tx.execute(
                &format!("delete from {s}.{t} where generation = any($1)"),
                &[&old],
            )
            .await
            .map_err(secrets.on("removing old generations"))?;
        }
        tx.commit()
            .await
            .map_err(secrets.on("removing old generations"))?;
        for o in &old {
            client
                .batch_execute(&format!(
                    "drop index concurrently if exists {s}.{}",
                    hnsw_name(*o as u64)
                ))
                .await
                .map_err(secrets.on("removing an old HNSW index"))?;
        }
        Ok(())
    }
}

/// PostgreSQL's text cannot hold the character U+0000: a document with one is refused before anything
/// is written, naming it (the local backend stores it).
pub(super) fn check_storable(new: &NewGeneration<'_>) -> Result<()> {
    let bad = |what: String| {
        Err(KgragError::Input(format!(
            "{what} holds the character U+0000, which PostgreSQL cannot store; remove it from the document \
             (the local backend stores it)"
        )))
    };
    for d in &new.manifest.documents {
        if d.id.contains('\0') || d.source.contains('\0') {
            return bad(format!("the id or source of document {:?}", d.id));
        }
        if d.title.as_deref().is_some_and(|t| t.contains('\0')) {
            return bad(format!("the title of document {:?}", d.id));
        }
    }
    for (key, text) in new.passages.keys().zip(new.passages.texts()) {
        if text.contains('\0') {
            return bad(format!("chunk {key}"));
        }
    }
    Ok(())
}

/// A binary `COPY … from stdin` in progress: rows streamed to the server, errors naming what was written.
struct Copy<'a> {
    writer: std::pin::Pin<Box<BinaryCopyInWriter>>,
    what: &'static str,
    secrets: &'a Secrets,
}

impl<'a> Copy<'a> {
    async fn start(
        tx: &tokio_postgres::Transaction<'_>,
        sql: &str,
        types: &[Type],
        what: &'static str,
        secrets: &'a Secrets,
    ) -> Result<Copy<'a>> {
        let sink = tx
            .copy_in::<_, Bytes>(sql)
            .await
            .map_err(secrets.on(what))?;
        Ok(Copy {
            writer: Box::pin(BinaryCopyInWriter::new(sink, types)),
            what,
            secrets,
        })
    }

    async fn row(&mut self, values: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> Result<()> {
        self.writer
            .as_mut()
            .write(values)
            .await
            .map_err(self.secrets.on(self.what))
    }

    async fn finish(mut self) -> Result<()> {
        self.writer
            .as_mut()
            .finish()
            .await
            .map(|_| ())
            .map_err(self.secrets.on(self.what))
    }
}

pub(super) fn hnsw_name(generation: u64) -> String {
    format!("passages_hnsw_g{generation}")
}

/// HiRAG's and LeanRAG's hierarchy (every layer's nodes, the relations) and HiRAG's communities with
/// their reports, as rows of `hierarchy_nodes`, `hierarchy_relations` and `communities`.
async fn write_projections(
    tx: &tokio_postgres::Transaction<'_>,
    s: &str,
    g: i64,
    method: &str,
    index: &dyn MethodIndex,
    secrets: &Secrets,
) -> Result<()> {
    let hirag = crate::methods::hirag_index(index);
    let leanrag = crate::methods::leanrag_index(index);
    // HiRAG holds its hierarchy packed: unpacked here, for the rows.
    let unpacked;
    let hierarchy = match (hirag, leanrag) {
        (Some(h), _) => {
            unpacked = h.hierarchy()?;
            &unpacked
        }
        (None, Some(l)) => l.hierarchy(),
        (None, None) => return Ok(()),
    };
    let mut copy = Copy::start(
        tx,
        &format!(
            "copy {s}.hierarchy_nodes (generation, method, layer, idx, name, kind, node) from stdin binary"
        ),
        &[
            Type::INT8,
            Type::TEXT,
            Type::INT4,
            Type::INT4,
            Type::TEXT,
            Type::TEXT,
            Type::JSONB,
        ],
        "writing the hierarchy's nodes",
        secrets,
    )
    .await?;
    for n in hierarchy.layers.iter().flatten() {
        let kind = serde_json::to_value(n.kind)?;
        let kind = kind.as_str().unwrap_or_default();
        let (layer, idx) = (n.id.layer as i32, n.id.idx as i32);
        // Without its vector: no use in SQL, and the index in `method_files` has it.
        let mut row = serde_json::to_value(n)?;
        if let Some(o) = row.as_object_mut() {
            o.remove("embedding");
            // LeanRAG's nodes above the base layer hold no sources when they are their children's.
            if let Some(l) = leanrag.filter(|_| n.id.layer > 0 && n.sources.is_empty()) {
                o.insert(
                    "sources".into(),
                    serde_json::to_value(l.node_sources(n.id))?,
                );
            }
        }
        copy.row(&[&g, &method, &layer, &idx, &n.name, &kind, &row])
            .await?;
    }
    copy.finish().await?;
    let mut copy = Copy::start(
        tx,
        &format!(
            "copy {s}.hierarchy_relations (generation, method, idx, a_layer, a_idx, b_layer, b_idx, \
             relation) from stdin binary"
        ),
        &[
            Type::INT8,
            Type::TEXT,
            Type::INT4,
            Type::INT4,
            Type::INT4,
            Type::INT4,
            Type::INT4,
            Type::JSONB,
        ],
        "writing the hierarchy's relations",
        secrets,
    )
    .await?;
    for (i, r) in hierarchy.relations.iter().enumerate() {
        let ids = [
            i as i32,
            r.a.layer as i32,
            r.a.idx as i32,
            r.b.layer as i32,
            r.b.idx as i32,
        ];
        copy.row(&[
            &g,
            &method,
            &ids[0],
            &ids[1],
            &ids[2],
            &ids[3],
            &ids[4],
            &Json(r),
        ])
        .await?;
    }
    copy.finish().await?;
    if let Some(h) = hirag {
        let mut copy = Copy::start(
            tx,
            &format!(
                "copy {s}.communities (generation, method, id, level, title, parent, report, community) \
                 from stdin binary"
            ),
            &[
                Type::INT8,
                Type::TEXT,
                Type::INT4,
                Type::INT4,
                Type::TEXT,
                Type::INT4,
                Type::TEXT,
                Type::JSONB,
            ],
            "writing the communities",
            secrets,
        )
        .await?;
        for c in h.communities() {
            let (id, level, parent) = (c.id as i32, c.level as i32, c.parent.map(|p| p as i32));
            // The index lists a community's edges on demand; the row keeps them.
            let c = &kgrag_hirag::CommunityRecord {
                edges: h.community_edges(c),
                ..c.clone()
            };
            copy.row(&[
                &g,
                &method,
                &id,
                &level,
                &c.title,
                &parent,
                &c.report_string,
                &Json(c),
            ])
            .await?;
        }
        copy.finish().await?;
    }
    Ok(())
}

async fn write_graph(
    tx: &tokio_postgres::Transaction<'_>,
    s: &str,
    g: i64,
    method: &str,
    file: &str,
    graph: &KnowledgeGraph,
    secrets: &Secrets,
) -> Result<()> {
    let (bounds, nodes, edges) = graph.rows();
    tx.execute(
        &format!(
            "insert into {s}.graphs (generation, method, file, node_slots, edge_slots) values ($1, $2, $3, $4, $5)"
        ),
        &[&g, &method, &file, &(bounds.0 as i32), &(bounds.1 as i32)],
    )
    .await
    .map_err(secrets.on("writing a graph"))?;
    {
        let mut copy = Copy::start(tx, &format!("copy {s}.graph_nodes (generation, method, file, idx, key, kind, name, node) from stdin binary"), &[
            Type::INT8,
            Type::TEXT,
            Type::TEXT,
            Type::INT4,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::JSONB,
        ], "writing a graph's nodes", secrets).await?;
        for (i, n) in nodes {
            let idx = i as i32;
            copy.row(&[
                &g,
                &method,
                &file,
                &idx,
                &n.key,
                &n.kind.as_str(),
                &n.name,
                &Json(n),
            ])
            .await?;
        }
        copy.finish().await?;
    }
    let mut copy = Copy::start(
        tx,
        &format!(
            "copy {s}.graph_edges (generation, method, file, idx, a, b, edge) from stdin binary"
        ),
        &[
            Type::INT8,
            Type::TEXT,
            Type::TEXT,
            Type::INT4,
            Type::INT4,
            Type::INT4,
            Type::JSONB,
        ],
        "writing a graph's edges",
        secrets,
    )
    .await?;
    for (i, a, b, edge) in edges {
        let (idx, a, b) = (i as i32, a as i32, b as i32);
        copy.row(&[&g, &method, &file, &idx, &a, &b, &Json(edge)])
            .await?;
    }
    copy.finish().await?;
    Ok(())
}
