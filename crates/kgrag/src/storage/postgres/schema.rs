//! The schema: its version, the migrations that bring an older schema to it, and reading the version.

use super::*;

/// The schema version this kgrag writes; [`MIGRATIONS`] brings any older schema to it.
pub const SCHEMA_VERSION: i32 = 4;

/// `(version, SQL)`: each migration, applied in order in one transaction. `{s}` is the quoted schema.
pub(super) const MIGRATIONS: &[(i32, &str)] = &[
    (
    1,
    "create table {s}.generations (
        generation bigint primary key,
        manifest jsonb not null,
        committed_at timestamptz not null default now());
     create table {s}.documents (
        generation bigint not null, ord integer not null, id text not null, doc_id text not null,
        title text, source text not null, chunks text[] not null,
        primary key (generation, ord));
     create table {s}.passages (
        generation bigint not null, ord integer not null, chunk_id text not null, body text not null,
        embedding public.vector not null,
        primary key (generation, ord));
     create table {s}.extractions (
        generation bigint not null, ord integer not null, chunk_id text not null,
        extraction jsonb not null,
        primary key (generation, ord));
     create table {s}.graphs (
        generation bigint not null, method text not null, file text not null,
        node_slots integer not null, edge_slots integer not null,
        primary key (generation, method, file));
     create table {s}.graph_nodes (
        generation bigint not null, method text not null, file text not null, idx integer not null,
        key text not null, kind text not null, name text not null, node jsonb not null,
        primary key (generation, method, file, idx));
     create table {s}.graph_edges (
        generation bigint not null, method text not null, file text not null, idx integer not null,
        a integer not null, b integer not null, edge jsonb not null,
        primary key (generation, method, file, idx));
     create table {s}.method_files (
        generation bigint not null, method text not null, name text not null, sha256 text not null,
        data bytea not null,
        primary key (generation, method, name));
     -- Stored as they are: vector stores and graphs barely compress, and compressing tens of MB costs
     -- seconds per commit.
     alter table {s}.method_files alter column data set storage external;",
    ),
    (
        2,
        // Finished extractions shared between the machines that build the index (a cache across
        // generations, as the local extraction store is).
        "create table {s}.extraction_cache (
        fingerprint text not null, chunk_id text not null, extraction jsonb not null,
        stored_at timestamptz not null default now(),
        primary key (fingerprint, chunk_id));",
    ),
    (
        3,
        // HiRAG's and LeanRAG's layers and HiRAG's communities with their reports, as rows to query
        // (the methods load their index from `method_files`; these are written beside it).
        "create table {s}.hierarchy_nodes (
        generation bigint not null, method text not null, layer integer not null, idx integer not null,
        name text not null, kind text not null, node jsonb not null,
        primary key (generation, method, layer, idx));
     create table {s}.hierarchy_relations (
        generation bigint not null, method text not null, idx integer not null,
        a_layer integer not null, a_idx integer not null, b_layer integer not null, b_idx integer not null,
        relation jsonb not null,
        primary key (generation, method, idx));
     create table {s}.communities (
        generation bigint not null, method text not null, id integer not null, level integer not null,
        title text not null, parent integer, report text not null, community jsonb not null,
        primary key (generation, method, id));",
    ),
    (
        4,
        // The work queue of a build split across machines (`kgrag index --distribute`, `kgrag worker`),
        // the workers it has seen, and what jobs leave behind for every build after: vectors by model and
        // text digest, chat replies by request digest.
        "create table {s}.jobs (
        id bigserial primary key, kind text not null, label text not null, key text not null,
        payload jsonb not null, state text not null default 'queued',
        attempts integer not null default 0, max_attempts integer not null,
        not_before timestamptz not null default now(), lease_until timestamptz, worker text,
        error text, queued_at timestamptz not null default now(), finished_at timestamptz,
        unique (kind, key));
     create index jobs_open on {s}.jobs (id) where state in ('queued', 'running');
     create index jobs_finished on {s}.jobs (finished_at) where state = 'done';
     create table {s}.workers (
        id text primary key, host text not null, pid integer not null, concurrency integer not null,
        started_at timestamptz not null default now(), seen_at timestamptz not null default now(),
        jobs_done bigint not null default 0, jobs_failed bigint not null default 0, stopped boolean not null default false);
     create table {s}.embedding_cache (
        model text not null, digest text not null, vector bytea not null,
        stored_at timestamptz not null default now(),
        primary key (model, digest));
     create table {s}.llm_cache (
        digest text primary key, model text not null, reply jsonb not null,
        stored_at timestamptz not null default now());",
    ),
];

/// The schema's version (0: no schema yet), read without creating anything.
pub(super) async fn schema_version(
    client: &Client,
    schema: &str,
    secrets: &Secrets,
) -> Result<i32> {
    let s = quoted(schema);
    let exists: Option<String> = col(
        &client
            .query_one(
                "select to_regclass($1)::text",
                &[&format!("{s}.schema_version")],
            )
            .await
            .map_err(secrets.on("reading the schema version"))?,
        0,
    )?;
    if exists.is_none() {
        return Ok(0);
    }
    col(
        &client
            .query_one(
                &format!("select coalesce(max(version), 0) from {s}.schema_version"),
                &[],
            )
            .await
            .map_err(secrets.on("reading the schema version"))?,
        0,
    )
}

/// Creates the schema and applies the migrations it lacks, under a transaction-level advisory lock (two
/// processes migrating at once apply each migration once). A schema that is current is only read: a
/// role without the right to create anything can open it.
pub(super) async fn migrate(client: &mut Client, schema: &str, secrets: &Secrets) -> Result<()> {
    let found = schema_version(client, schema, secrets).await?;
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    if found > SCHEMA_VERSION {
        return Err(KgragError::Database(format!(
            "the schema {schema:?} has version {found}; this kgrag knows versions up to {SCHEMA_VERSION}: \
             use a newer kgrag"
        )));
    }
    let s = quoted(schema);
    let tx = client
        .transaction()
        .await
        .map_err(secrets.on("starting the migration"))?;
    tx.execute(
        "select pg_advisory_xact_lock($1)",
        &[&lock_key("kgrag migrate")],
    )
    .await
    .map_err(secrets.on("locking for the migration"))?;
    tx.batch_execute(&format!(
        "create extension if not exists vector with schema public;
         create schema if not exists {s};
         create table if not exists {s}.schema_version (
            version integer primary key,
            applied_at timestamptz not null default now());"
    ))
    .await
    .map_err(
        secrets.on("creating the schema (the pgvector extension must be installed on the server)"),
    )?;
    let current: i32 = col(
        &tx.query_one(
            &format!("select coalesce(max(version), 0) from {s}.schema_version"),
            &[],
        )
        .await
        .map_err(secrets.on("reading the schema version"))?,
        0,
    )?;
    if current > SCHEMA_VERSION {
        return Err(KgragError::Database(format!(
            "the schema {schema:?} has version {current}; this kgrag knows versions up to {SCHEMA_VERSION}: \
             use a newer kgrag"
        )));
    }
    for (version, sql) in MIGRATIONS {
        if *version <= current {
            continue;
        }
        tx.batch_execute(&sql.replace("{s}", &s))
            .await
            .map_err(secrets.on("migrating the schema"))?;
        tx.execute(
            &format!("insert into {s}.schema_version (version) values ($1)"),
            &[version],
        )
        .await
        .map_err(secrets.on("recording the schema version"))?;
    }
    tx.commit()
        .await
        .map_err(secrets.on("committing the migration"))?;
    Ok(())
}
