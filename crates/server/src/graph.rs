//! `GET /v1/graph` (the neighbourhood of an entity in HippoRAG 2's graph or HiRAG's) and
//! `GET /v1/communities` (HiRAG's communities and their reports).

use std::collections::{BTreeMap, HashMap, VecDeque};

use axum::Json;
use kgrag::graph_store::{KnowledgeGraph, NodeKind};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{check_range, committed, ApiQuery};
use crate::error::{ApiError, ApiResult};
use crate::indexes::Reading;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GraphQuery {
    #[serde(default)]
    method: Option<String>,
    entity: Option<String>,
    #[serde(default)]
    depth: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

/// Spellings of a name to look up: as given, lower case (HippoRAG 2's phrases), upper case and quoted
/// upper case (HiRAG's entity names).
fn spellings(name: &str) -> Vec<String> {
    let t = name.trim();
    let mut out = vec![
        t.to_owned(),
        t.to_lowercase(),
        t.to_uppercase(),
        format!("\"{}\"", t.trim_matches('"').to_uppercase()),
    ];
    out.dedup();
    out
}

/// Nodes and edges the response holds, keyed by node id.
#[derive(Default)]
struct Neighbourhood {
    nodes: Vec<Value>,
    ids: HashMap<String, usize>,
    edges: Vec<Value>,
}

impl Neighbourhood {
    fn has(&self, id: &str) -> bool {
        self.ids.contains_key(id)
    }

    fn add_node(&mut self, id: String, node: Value) {
        self.ids.insert(id, self.nodes.len());
        self.nodes.push(node);
    }

    fn json(self, method: &str, center: &str, truncated: bool) -> Value {
        json!({
            "method": method,
            "center": center,
            "nodes": self.nodes,
            "edges": self.edges,
            "truncated": truncated,
        })
    }
}

/// How to read one graph for [`walk`]: a node's id (cheap), its JSON, its `(neighbour, edge)` pairs and an
/// edge's JSON. JSON is made only for what the response keeps.
struct View<I, N, X, E> {
    id: I,
    node: N,
    neighbours: X,
    edge: E,
}

/// Breadth-first from `start` to `depth` hops, at most `limit` nodes; edges are kept between kept nodes.
/// Returns whether nodes were left out.
fn walk<K, A, I, N, X, E>(
    out: &mut Neighbourhood,
    start: K,
    depth: usize,
    limit: usize,
    view: View<I, N, X, E>,
) -> bool
where
    K: Copy + Eq + std::hash::Hash,
    A: Copy,
    I: Fn(K) -> String,
    N: Fn(K) -> Value,
    X: Fn(K) -> Vec<(K, A)>,
    E: Fn(A) -> Value,
{
    let mut level: HashMap<K, usize> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    level.insert(start, 0);
    out.add_node((view.id)(start), (view.node)(start));
    let mut truncated = false;
    let mut seen_edges = std::collections::HashSet::new();
    while let Some(u) = queue.pop_front() {
        let d = level.get(&u).copied().unwrap_or(0);
        let uid = (view.id)(u);
        for (v, handle) in (view.neighbours)(u) {
            let vid = (view.id)(v);
            if !out.has(&vid) {
                if d >= depth {
                    continue;
                }
                if out.nodes.len() >= limit {
                    truncated = true;
                    continue;
                }
                out.add_node(vid.clone(), (view.node)(v));
                level.insert(v, d + 1);
                queue.push_back(v);
            }
            let key = if uid < vid {
                (uid.clone(), vid.clone())
            } else {
                (vid.clone(), uid.clone())
            };
            if seen_edges.insert(key) {
                let mut e = (view.edge)(handle);
                e["source"] = Value::String(uid.clone());
                e["target"] = Value::String(vid);
                out.edges.push(e);
            }
        }
    }
    truncated
}

fn hippo_neighbourhood(
    graph: &KnowledgeGraph,
    entity: &str,
    depth: usize,
    limit: usize,
) -> ApiResult<Value> {
    let start = spellings(entity)
        .iter()
        .find_map(|n| {
            graph
                .find_by_name(n)
                .iter()
                .copied()
                .find(|i| graph.node(*i).is_some_and(|x| x.kind == NodeKind::Entity))
        })
        .ok_or_else(|| ApiError::not_found(format!("no entity {entity:?} in hipporag2's graph")))?;
    let view = View {
        id: |i| graph.node(i).map(|n| n.key.clone()).unwrap_or_default(),
        node: |i| match graph.node(i) {
            Some(n) => {
                let label = if n.kind == NodeKind::Passage {
                    let text: String = n.description.chars().take(60).collect();
                    if text.is_empty() {
                        n.name.clone()
                    } else {
                        format!("{text}…")
                    }
                } else {
                    n.name.clone()
                };
                json!({"id": n.key, "label": label, "kind": n.kind.as_str(), "degree": graph.degree(i)})
            }
            None => Value::Null,
        },
        neighbours: |i| {
            graph
                .incident(i)
                .into_iter()
                .map(|(j, e, _)| (j, e))
                .collect()
        },
        edge: |e| match graph.edge(e) {
            Some(e) => {
                let kinds: Vec<&str> = e.kinds().map(|k| k.as_str()).collect();
                let weight = if e.synonymy.is_some() && e.fact_count() == 0 {
                    1.0
                } else {
                    f64::from(e.fact_count().max(1))
                };
                json!({"label": kinds.join(", "), "weight": weight})
            }
            None => json!({}),
        },
    };
    let mut out = Neighbourhood::default();
    let truncated = walk(&mut out, start, depth, limit, view);
    let center = graph
        .node(start)
        .map(|n| n.name.clone())
        .unwrap_or_default();
    Ok(out.json("hipporag2", &center, truncated))
}

fn hirag_neighbourhood(
    index: &kgrag::hirag::HiragIndex,
    entity: &str,
    depth: usize,
    limit: usize,
) -> ApiResult<Value> {
    let graph = index.graph();
    let start = spellings(entity)
        .iter()
        .find_map(|n| graph.find(n))
        .ok_or_else(|| ApiError::not_found(format!("no entity {entity:?} in HiRAG's graph")))?;
    let view = View {
        id: |i: u32| format!("h:{i}"),
        node: |i: u32| match graph.node(i) {
            Some(n) => {
                let kind = if n.layer > 0 { "summary" } else { "entity" };
                json!({"id": format!("h:{i}"), "label": n.name.trim_matches('"'), "kind": kind,
                       "layer": n.layer, "type": n.entity_type.trim_matches('"'), "degree": graph.degree(i)})
            }
            None => Value::Null,
        },
        neighbours: |i: u32| graph.neighbours(i).to_vec(),
        edge: |e: u32| {
            let edge = graph.edge(e);
            let label: String = edge
                .map(|x| x.description.chars().take(80).collect())
                .unwrap_or_default();
            json!({"label": label, "weight": edge.map_or(1.0, |x| x.weight)})
        },
    };
    let mut out = Neighbourhood::default();
    let truncated = walk(&mut out, start, depth, limit, view);
    let center = graph
        .node(start)
        .map(|n| n.name.trim_matches('"').to_owned())
        .unwrap_or_default();
    Ok(out.json("hirag", &center, truncated))
}

/// `GET /v1/graph?method=&entity=&depth=&limit=`.
pub(crate) async fn graph(
    target: Reading,
    ApiQuery(q): ApiQuery<GraphQuery>,
) -> ApiResult<Json<Value>> {
    let searcher = committed(&target.lease)?;
    let Some(entity) = q.entity.filter(|e| !e.trim().is_empty()) else {
        return Err(ApiError::unprocessable("give ?entity=NAME"));
    };
    let depth = check_range("depth", q.depth.unwrap_or(1), 1, 3)?;
    let limit = check_range("limit", q.limit.unwrap_or(60), 2, 1000)?;
    let methods = searcher.methods();
    let has = |m: &str| methods.iter().any(|x| x == m);
    let method = match q.method {
        Some(m) => m,
        None if has("hipporag2") => "hipporag2".to_owned(),
        None => "hirag".to_owned(),
    };
    if !matches!(method.as_str(), "hipporag2" | "hirag") {
        return Err(ApiError::bad_request(format!(
            "no graph view for {method:?}: give method=hipporag2 or method=hirag"
        )));
    }
    if !has(&method) {
        return Err(ApiError::not_found(format!(
            "{method} is not indexed here (indexed: {})",
            methods.join(", ")
        )));
    }
    let index = searcher.method_index(&method)?;
    let value = if method == "hipporag2" {
        let hippo = kgrag::methods::hippo_index(index.as_ref())
            .ok_or_else(|| ApiError::internal("hipporag2's index has no graph"))?;
        let graph = hippo
            .graph()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        hippo_neighbourhood(&graph, &entity, depth, limit)?
    } else {
        let hirag = kgrag::methods::hirag_index(index.as_ref())
            .ok_or_else(|| ApiError::internal("hirag's index has no graph"))?;
        hirag_neighbourhood(hirag, &entity, depth, limit)?
    };
    Ok(Json(value))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommunityQuery {
    #[serde(default)]
    level: Option<u32>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /v1/communities?level=&limit=`: HiRAG's communities of a level (default 0, the coarsest), the
/// largest first, with their member entities and reports.
pub(crate) async fn communities(
    target: Reading,
    ApiQuery(q): ApiQuery<CommunityQuery>,
) -> ApiResult<Json<Value>> {
    let searcher = committed(&target.lease)?;
    if !searcher.methods().iter().any(|m| m == "hirag") {
        return Err(ApiError::not_found(
            "HiRAG is not indexed here: its communities come with `[index] methods` holding \"hirag\"",
        ));
    }
    let index = searcher.method_index("hirag")?;
    let hirag = kgrag::methods::hirag_index(index.as_ref())
        .ok_or_else(|| ApiError::internal("hirag's index is of another kind"))?;
    let mut per_level: BTreeMap<u32, usize> = BTreeMap::new();
    for c in hirag.communities() {
        *per_level.entry(c.level).or_default() += 1;
    }
    let levels = per_level.keys().next_back().map_or(0, |l| l + 1);
    let level = q.level.unwrap_or(0);
    if levels > 0 && level >= levels {
        return Err(ApiError::not_found(format!(
            "no level {level}: HiRAG's communities have levels 0 to {}",
            levels - 1
        )));
    }
    let limit = check_range("limit", q.limit.unwrap_or(100), 1, 10_000)?;
    let graph = hirag.graph();
    let mut list: Vec<_> = hirag
        .communities()
        .iter()
        .filter(|c| c.level == level)
        .collect();
    list.sort_by(|a, b| b.nodes.len().cmp(&a.nodes.len()).then(a.id.cmp(&b.id)));
    let total = list.len();
    let communities: Vec<Value> = list
        .into_iter()
        .take(limit)
        .map(|c| {
            let entities: Vec<String> = c
                .nodes
                .iter()
                .take(30)
                .filter_map(|n| graph.node(*n).map(|x| x.name.trim_matches('"').to_owned()))
                .collect();
            json!({
                "id": c.id,
                "level": c.level,
                "title": if c.report.title.trim().is_empty() { c.title.clone() } else { c.report.title.clone() },
                "size": c.nodes.len(),
                "entities": entities,
                "rating": c.report.rating,
                "summary": c.report.summary,
                "report": c.report_string,
                "parent": c.parent,
                "sub_communities": c.sub_communities,
            })
        })
        .collect();
    Ok(Json(json!({
        "levels": levels,
        "level": level,
        "total": total,
        "communities": communities,
    })))
}
