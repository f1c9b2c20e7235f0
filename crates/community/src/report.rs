//! Community reports (spec hirag §6.3–§6.4, §10): the packed context of a community (entity and relation
//! tables within a token budget, sub-community reports substituted when the raw tables do not fit), a JSON
//! report written by a chat model with one corrective retry and the extractive report as fallback, deepest
//! level first, and reuse of a report whose input hash is unchanged.

use std::borrow::{Borrow, Cow};
use std::collections::{BTreeMap, HashMap};

use futures_util::{stream, StreamExt};
use kgrag_openie::graphrag::MERGE_SEPARATOR;
use kgrag_openie::lenient::{find_object_with_key, parse_value, strip_fences};
use kgrag_text::table::{csv_table as csv, Cell};
use kgrag_text::{Budget, Encoding, ExtractiveSummarizer};
use kgrag_types::{ChatModel, ChatRequest, GenerationSettings, Message, ResponseFormat};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Result;

/// HiRAG's community-report input budget in tokens (`report_context_tokens`, spec hirag §6.3): the
/// `budget` to give [`pack_context`] and [`generate_reports`] unless configured otherwise.
pub const REPORT_CONTEXT_TOKENS: usize = 32_768;

/// A member entity of a community.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportEntity<'a> {
    /// Name.
    pub name: Cow<'a, str>,
    /// Type.
    pub entity_type: Cow<'a, str>,
    /// Description.
    pub description: Cow<'a, str>,
    /// Degree in the graph.
    pub degree: usize,
}

/// A relation incident to a community member.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportRelation<'a> {
    /// Source name.
    pub source: Cow<'a, str>,
    /// Target name.
    pub target: Cow<'a, str>,
    /// Description.
    pub description: Cow<'a, str>,
    /// degree(source) + degree(target).
    pub rank: usize,
}

/// What a report is written from. Its texts may borrow from the caller's graph (a level of communities
/// lists every member's description again: borrowing keeps them from being held twice).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommunityInput<'a> {
    /// Community id.
    pub id: usize,
    /// Level (0 = coarsest).
    pub level: usize,
    /// Members.
    pub entities: Vec<ReportEntity<'a>>,
    /// Relations incident to members.
    pub relations: Vec<ReportRelation<'a>>,
    /// Ids of the sub-communities (one level deeper).
    pub sub_communities: Vec<usize>,
    /// |chunk ids| / max over communities.
    pub occurrence: f64,
}

/// One finding of a report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Short statement.
    pub summary: String,
    /// Explanation.
    pub explanation: String,
}

/// How a report was written (shared with the hierarchy's summaries).
pub use kgrag_types::Outcome;

/// A community report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Title.
    pub title: String,
    /// Summary.
    pub summary: String,
    /// Impact rating 0–10.
    pub rating: f64,
    /// Why that rating.
    pub rating_explanation: String,
    /// Findings.
    pub findings: Vec<Finding>,
    /// How it was written.
    pub outcome: Outcome,
    /// Hash of the input it was written from.
    pub input_hash: String,
    /// Whether this run reused it from an earlier build (its `outcome` says how it was first written).
    #[serde(default)]
    pub reused: bool,
    /// The last model error or unusable-reply reason, when the report fell back.
    #[serde(default)]
    pub failure: Option<String>,
}

impl Report {
    /// `# title\n\nsummary\n\n` then each finding as `## summary\n\nexplanation`, joined by blank lines.
    pub fn render(&self) -> String {
        let findings: Vec<String> = self
            .findings
            .iter()
            .map(|f| format!("## {}\n\n{}", f.summary, f.explanation))
            .collect();
        format!(
            "# {}\n\n{}\n\n{}",
            self.title,
            self.summary,
            findings.join("\n\n")
        )
    }
}

fn tokens(text: &str) -> usize {
    Encoding::O200kBase
        .count(text)
        .unwrap_or_else(|_| text.split_whitespace().count())
}

fn sort_entities(list: &mut [&ReportEntity]) {
    list.sort_by(|a, b| b.degree.cmp(&a.degree).then_with(|| a.name.cmp(&b.name)));
}

fn sort_relations(list: &mut [&ReportRelation]) {
    list.sort_by(|a, b| {
        b.rank
            .cmp(&a.rank)
            .then_with(|| (&a.source, &a.target).cmp(&(&b.source, &b.target)))
    });
}

/// Entity rows in the given order while their description tokens fit `budget`; returns the table and
/// whether rows were left out.
fn entity_table(ordered: &[&ReportEntity], budget: usize) -> (String, bool) {
    let mut used = 0;
    let mut rows = Vec::new();
    let mut truncated = false;
    for (i, e) in ordered.iter().enumerate() {
        used += tokens(&e.description);
        if used > budget {
            truncated = true;
            break;
        }
        rows.push(vec![
            Cell::num(i),
            Cell::Text(e.name.to_string()),
            Cell::Text(e.entity_type.to_string()),
            Cell::Text(e.description.to_string()),
            Cell::num(e.degree),
        ]);
    }
    (
        csv(
            "Entities",
            &["id", "entity", "type", "description", "degree"],
            &rows,
        ),
        truncated,
    )
}

/// Relation rows in the given order while their description tokens fit `budget`.
fn relation_table(ordered: &[&ReportRelation], budget: usize) -> (String, bool) {
    let mut used = 0;
    let mut rows = Vec::new();
    let mut truncated = false;
    for (i, r) in ordered.iter().enumerate() {
        used += tokens(&r.description);
        if used > budget {
            truncated = true;
            break;
        }
        rows.push(vec![
            Cell::num(i),
            Cell::Text(r.source.to_string()),
            Cell::Text(r.target.to_string()),
            Cell::Text(r.description.to_string()),
            Cell::num(r.rank),
        ]);
    }
    (
        csv(
            "Relationships",
            &["id", "source", "target", "description", "rank"],
            &rows,
        ),
        truncated,
    )
}

/// The packed context of a community within `budget` tokens (spec hirag §6.3): the raw tables, or — when
/// they do not fit and sub-community reports exist — a reports table first, then the tables refilled with
/// what the included sub-communities do not cover.
pub fn pack_context(
    community: &CommunityInput<'_>,
    communities: &HashMap<usize, &CommunityInput>,
    reports: &HashMap<usize, Report>,
    budget: usize,
) -> String {
    pack_context_with(
        community,
        || {
            community
                .sub_communities
                .iter()
                .filter_map(|id| Some((*communities.get(id)?, reports.get(id)?)))
                .collect()
        },
        budget,
    )
}

/// [`pack_context`] with the sub-communities that have a report (their inputs and reports) made by `subs`,
/// called only when the raw tables do not fit.
fn pack_context_with<'s, 'x: 's, C: Borrow<CommunityInput<'x>>>(
    community: &CommunityInput<'_>,
    subs: impl FnOnce() -> Vec<(C, &'s Report)>,
    budget: usize,
) -> String {
    let mut entities: Vec<&ReportEntity> = community.entities.iter().collect();
    let mut relations: Vec<&ReportRelation> = community.relations.iter().collect();
    sort_entities(&mut entities);
    sort_relations(&mut relations);
    let (e_table, e_cut) = entity_table(&entities, budget / 2);
    let (r_table, r_cut) = relation_table(&relations, budget / 2);
    if !(e_cut || r_cut) || community.sub_communities.is_empty() {
        return format!("{e_table}\n\n{r_table}");
    }
    let owned = subs();
    if owned.is_empty() {
        return format!("{e_table}\n\n{r_table}");
    }
    let mut subs: Vec<(&CommunityInput, &Report)> =
        owned.iter().map(|(c, r)| (c.borrow(), *r)).collect();
    subs.sort_by(|a, b| {
        b.0.occurrence
            .total_cmp(&a.0.occurrence)
            .then(a.0.id.cmp(&b.0.id))
    });
    let mut used = 0;
    let mut rows = Vec::new();
    // What the included sub-communities cover (the reference's `contain_nodes` / `contain_edges`): their
    // members, and their relations (every edge incident to a member, spec §6.2).
    let mut covered = std::collections::HashSet::new();
    let mut covered_pairs: std::collections::HashSet<(&str, &str)> =
        std::collections::HashSet::new();
    for (i, (sub, report)) in subs.iter().enumerate() {
        let text = report.render();
        used += tokens(&text);
        if used > budget {
            break;
        }
        rows.push(vec![
            Cell::num(i),
            Cell::Text(text),
            Cell::Num(format!("{:?}", report.rating)),
            Cell::Num(format!("{:?}", sub.occurrence)),
        ]);
        covered.extend(sub.entities.iter().map(|e| &*e.name));
        for r in &sub.relations {
            covered_pairs.insert((&*r.source, &*r.target));
            covered_pairs.insert((&*r.target, &*r.source));
        }
    }
    if rows.is_empty() {
        // Not even one sub-report fits: the raw tables.
        return format!("{e_table}\n\n{r_table}");
    }
    let reports_table = csv("Reports", &["id", "report", "rating", "importance"], &rows);
    let rest = budget.saturating_sub(tokens(&reports_table)) / 2;
    // Refill preferring what the included sub-communities do not cover: uncovered items first (each group
    // keeps its own order), covered ones after them.
    let (mut e_order, covered_e): (Vec<&ReportEntity>, Vec<&ReportEntity>) =
        entities.iter().partition(|e| !covered.contains(&*e.name));
    e_order.extend(covered_e);
    let (mut r_order, covered_r): (Vec<&ReportRelation>, Vec<&ReportRelation>) = relations
        .iter()
        .partition(|r| !covered_pairs.contains(&(&*r.source, &*r.target)));
    r_order.extend(covered_r);
    let (e_table, _) = entity_table(&e_order, rest);
    let (r_table, _) = relation_table(&r_order, rest);
    format!("{reports_table}\n\n{e_table}\n\n{r_table}")
}

/// The hash a report is keyed by: sha256 over the level, the sorted member names and the packed context.
pub fn input_hash(community: &CommunityInput, context: &str) -> String {
    let mut names: Vec<&str> = community.entities.iter().map(|e| &*e.name).collect();
    names.sort_unstable();
    let mut h = Sha256::new();
    h.update(community.level.to_le_bytes());
    for n in names {
        h.update(n.as_bytes());
        h.update([0u8]);
    }
    h.update(context.as_bytes());
    hex::encode(h.finalize())
}

/// The report-writing messages (our own wording).
pub fn report_messages(context: &str) -> Vec<Message> {
    let system = "You write reports about communities of a knowledge graph: groups of entities and the relations \
between them. A report tells a decision maker who the key entities are, how they relate, and why the group \
matters.";
    let user = format!(
        "{context}\n\nUsing only the tables above, write a report on this community. Reply with one JSON object \
and nothing else:\n{{\"title\": \"a short name naming key entities\", \"summary\": \"an overview of the \
structure and the main relations\", \"rating\": a number from 0 to 10 for the community's impact, \
\"rating_explanation\": \"one sentence\", \"findings\": [{{\"summary\": \"one insight\", \"explanation\": \
\"a grounded paragraph\"}}]}}\nGive five to ten findings."
    );
    vec![Message::system(system), Message::user(user)]
}

/// A community report from a model's reply (one JSON object with `title`, `summary`, `rating`,
/// `rating_explanation` and `findings`, fenced, surrounded by prose or written as a Python literal), or
/// why it is unusable. The rating is clamped to 0–10 (0 when missing or not a finite number).
pub fn parse_report(reply: &str) -> std::result::Result<Report, String> {
    let unfenced = strip_fences(reply);
    let object = find_object_with_key(&unfenced, "title")
        .ok_or("it holds no JSON object with a \"title\" key")?;
    let v = parse_value(object).ok_or("its JSON object does not parse")?;
    let s = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .map(|x| x.trim().to_owned())
            .unwrap_or_default()
    };
    let title = s("title");
    let summary = s("summary");
    if title.is_empty() || summary.is_empty() {
        return Err("\"title\" and \"summary\" must not be empty".into());
    }
    let rating = v
        .get("rating")
        .and_then(|r| {
            r.as_f64()
                .or_else(|| r.as_str().and_then(|t| t.trim().parse().ok()))
        })
        .filter(|r: &f64| r.is_finite())
        .unwrap_or(0.0)
        .clamp(0.0, 10.0);
    let findings = v
        .get("findings")
        .and_then(|f| f.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|f| {
                    let summary = f.get("summary")?.as_str()?.trim().to_owned();
                    let explanation = f
                        .get("explanation")
                        .and_then(|e| e.as_str())
                        .unwrap_or("")
                        .trim()
                        .to_owned();
                    Some(Finding {
                        summary,
                        explanation,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Report {
        title,
        summary,
        rating,
        rating_explanation: s("rating_explanation"),
        findings,
        outcome: Outcome::Llm,
        input_hash: String::new(),
        reused: false,
        failure: None,
    })
}

/// The non-empty parts of a `<SEP>`-joined description, trimmed.
fn description_parts(description: &str) -> impl Iterator<Item = &str> {
    description
        .split(MERGE_SEPARATOR)
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

/// The offline kit's report (spec hirag §10): title `Community <id>: ` + top-3 members by degree, summary =
/// extractive (≤ 150 tokens) of member descriptions, rating 0, findings = top-5 members by degree.
pub async fn extractive_report(
    community: &CommunityInput<'_>,
    text: &ExtractiveSummarizer,
) -> Result<Report> {
    let mut by_degree: Vec<&ReportEntity> = community.entities.iter().collect();
    sort_entities(&mut by_degree);
    let top: Vec<&str> = by_degree.iter().take(3).map(|e| &*e.name).collect();
    // Merged descriptions are `<SEP>`-joined parts (spec §3): summarise the parts.
    let descriptions: Vec<&str> = community
        .entities
        .iter()
        .flat_map(|e| description_parts(&e.description))
        .collect();
    let summary = text
        .summarize_texts(
            &descriptions,
            None,
            Budget::Tokens {
                max: 150,
                encoding: Encoding::O200kBase,
            },
        )
        .await?;
    let findings = by_degree
        .iter()
        .take(5)
        .map(|e| Finding {
            summary: e.name.to_string(),
            explanation: description_parts(&e.description)
                .next()
                .and_then(|part| kgrag_text::sentences(part).first().map(|s| (*s).to_owned()))
                .unwrap_or_default(),
        })
        .collect();
    Ok(Report {
        title: format!("Community {}: {}", community.id, top.join(", ")),
        summary,
        rating: 0.0,
        rating_explanation: String::new(),
        findings,
        outcome: Outcome::Extractive,
        input_hash: String::new(),
        reused: false,
        failure: None,
    })
}

/// The report of `community` whose packed `context` hashes to `hash`: the one in `previous` under that hash
/// (marked reused) — an extractive or fallback one only while there is still no model to write a better
/// one — else one written now.
async fn reuse_or_write(
    community: &CommunityInput<'_>,
    context: &str,
    hash: String,
    previous: &HashMap<String, Report>,
    chat: Option<&dyn ChatModel>,
    text: &ExtractiveSummarizer,
) -> Result<Report> {
    if let Some(r) = previous
        .get(&hash)
        .filter(|r| chat.is_none() || matches!(r.outcome, Outcome::Llm | Outcome::Retried))
    {
        let mut r = r.clone();
        r.reused = true;
        return Ok(r);
    }
    let mut r = write_report(community, context, chat, text).await?;
    r.input_hash = hash;
    Ok(r)
}

/// Writes one report through `chat` (one corrective retry), else extractively.
async fn write_report(
    community: &CommunityInput<'_>,
    context: &str,
    chat: Option<&dyn ChatModel>,
    text: &ExtractiveSummarizer,
) -> Result<Report> {
    let Some(chat) = chat else {
        return extractive_report(community, text).await;
    };
    let mut messages = report_messages(context);
    let mut failure = None;
    for attempt in 0..2 {
        let request = ChatRequest {
            messages: messages.clone(),
            settings: GenerationSettings {
                temperature: Some(0.0),
                response_format: ResponseFormat::JsonObject,
                ..GenerationSettings::default()
            },
        };
        match chat.chat(&request).await {
            Ok(reply) => match parse_report(&reply.content) {
                Ok(mut r) => {
                    r.outcome = if attempt == 0 {
                        Outcome::Llm
                    } else {
                        Outcome::Retried
                    };
                    return Ok(r);
                }
                Err(why) => {
                    failure = Some(format!("unusable reply: {why}"));
                    messages.push(Message::assistant(reply.content));
                    messages.push(Message::user(format!(
                        "That answer could not be used: {why}. Reply again with the JSON object only."
                    )));
                }
            },
            Err(e) => failure = Some(format!("model error: {e}")),
        }
    }
    let mut r = extractive_report(community, text).await?;
    r.outcome = Outcome::Fallback;
    r.failure = failure;
    Ok(r)
}

/// Writes the reports of `communities`, deepest level first (a level's communities concurrently, results
/// in id order), reusing from `previous` (keyed by input hash) every report whose input is unchanged —
/// except extractive and fallback reports when a chat model is given. Duplicate ids are an error.
///
/// [`generate_reports_by_level`] does the same with the inputs made a level at a time.
pub async fn generate_reports(
    communities: &[CommunityInput<'_>],
    chat: Option<&dyn ChatModel>,
    text: &ExtractiveSummarizer,
    previous: &HashMap<String, Report>,
    budget: usize,
    concurrency: usize,
) -> Result<BTreeMap<usize, Report>> {
    let mut ids = std::collections::HashSet::with_capacity(communities.len());
    if let Some(c) = communities.iter().find(|c| !ids.insert(c.id)) {
        return Err(crate::CommunityError::Input(format!(
            "community id {} appears twice",
            c.id
        )));
    }
    let levels: Vec<usize> = communities.iter().map(|c| c.level).collect();
    reports_by_level(
        &levels,
        |level| {
            communities
                .iter()
                .filter(|c| c.level == level)
                .collect::<Vec<_>>()
        },
        Below::Every,
        chat,
        text,
        previous,
        budget,
        concurrency,
    )
    .await
}

/// Which deeper levels' inputs [`reports_by_level`] keeps for sub-community lookups.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Below {
    /// Only the level just below (hierarchical Leiden's sub-communities are exactly one level deeper).
    Next,
    /// Every deeper level (a caller's sub-community may sit deeper).
    Every,
}

/// [`generate_reports`] with the communities of each of `levels` made by `level_inputs` when that level's
/// reports are due (deepest level first): only a level's inputs and those of the level below it (whose
/// reports may stand in for raw tables, spec hirag §6.3) are held at once. Every level lists the members'
/// descriptions and their relations again, so a caller whose inputs borrow from its graph holds two
/// levels' rows instead of all of them. Sub-communities must be exactly one level deeper than their
/// parent (as [`hierarchical_leiden`](crate::hierarchical_leiden) makes them): a deeper one is not found
/// and its report does not stand in. Each community must come at its own level; duplicate ids are an
/// error (found when their second level is made).
pub async fn generate_reports_by_level<'g>(
    levels: &[usize],
    level_inputs: impl FnMut(usize) -> Vec<CommunityInput<'g>>,
    chat: Option<&dyn ChatModel>,
    text: &ExtractiveSummarizer,
    previous: &HashMap<String, Report>,
    budget: usize,
    concurrency: usize,
) -> Result<BTreeMap<usize, Report>> {
    reports_by_level(
        levels,
        level_inputs,
        Below::Next,
        chat,
        text,
        previous,
        budget,
        concurrency,
    )
    .await
}

/// The two above: each level's inputs owned (`C` = `CommunityInput`) or borrowed from the caller's
/// slice (`C` = `&CommunityInput`).
#[allow(clippy::too_many_arguments)]
async fn reports_by_level<'g, C: Borrow<CommunityInput<'g>>>(
    levels: &[usize],
    mut level_inputs: impl FnMut(usize) -> Vec<C>,
    keep: Below,
    chat: Option<&dyn ChatModel>,
    text: &ExtractiveSummarizer,
    previous: &HashMap<String, Report>,
    budget: usize,
    concurrency: usize,
) -> Result<BTreeMap<usize, Report>> {
    let mut levels = levels.to_vec();
    levels.sort_unstable();
    levels.dedup();
    let mut ids = std::collections::HashSet::new();
    let mut done: HashMap<usize, Report> = HashMap::new();
    let mut below: Vec<C> = Vec::new();
    for &level in levels.iter().rev() {
        let mut this = level_inputs(level);
        for c in this.iter().map(C::borrow) {
            if !ids.insert(c.id) {
                return Err(crate::CommunityError::Input(format!(
                    "community id {} appears twice",
                    c.id
                )));
            }
            if c.level != level {
                return Err(crate::CommunityError::Input(format!(
                    "community {} of level {} was given for level {level}",
                    c.id, c.level
                )));
            }
        }
        this.sort_by_key(|c| c.borrow().id);
        let by_id: HashMap<usize, &CommunityInput> = below
            .iter()
            .chain(&this)
            .map(|c| (c.borrow().id, c.borrow()))
            .collect();
        // Each context is packed when its report is due (at most `concurrency` held at once): a level's
        // contexts together hold every member's description again.
        let (by_id, done_below) = (&by_id, &done);
        let written: Vec<Result<(usize, Report)>> = stream::iter(this.iter().map(C::borrow))
            .map(|c| {
                let context = pack_context(c, by_id, done_below, budget);
                let hash = input_hash(c, &context);
                let id = c.id;
                async move {
                    let r = reuse_or_write(c, &context, hash, previous, chat, text).await?;
                    Ok((id, r))
                }
            })
            .buffered(concurrency.max(1))
            .collect()
            .await;
        for w in written {
            let (id, r) = w?;
            done.insert(id, r);
        }
        match keep {
            Below::Next => below = this,
            Below::Every => below.extend(this),
        }
    }
    Ok(done.into_iter().collect())
}

/// [`generate_reports_by_level`] with each community's input made by `input` when its report is due, and
/// dropped once it is written: `communities` lists every community as `(id, level)`; `input(id)` makes that
/// community's input, and again each sub-community's (one level deeper, with a report) when the raw tables
/// of its parent do not fit. At most `concurrency` communities' rows (and their sub-communities') are held
/// at once, instead of two levels' — every level lists each member's relations again. The reports are
/// those [`generate_reports_by_level`] writes from the same inputs. Duplicate ids, an id `input` does not
/// know, or an input of another id or level are errors.
pub async fn generate_reports_on_demand<'g>(
    communities: &[(usize, usize)],
    input: impl Fn(usize) -> Option<CommunityInput<'g>>,
    chat: Option<&dyn ChatModel>,
    text: &ExtractiveSummarizer,
    previous: &HashMap<String, Report>,
    budget: usize,
    concurrency: usize,
) -> Result<BTreeMap<usize, Report>> {
    let mut level_of: HashMap<usize, usize> = HashMap::with_capacity(communities.len());
    for &(id, level) in communities {
        if level_of.insert(id, level).is_some() {
            return Err(crate::CommunityError::Input(format!(
                "community id {id} appears twice"
            )));
        }
    }
    let mut by_level: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &(id, level) in communities {
        by_level.entry(level).or_default().push(id);
    }
    let made = |id: usize, level: usize| -> Result<CommunityInput<'g>> {
        let c = input(id)
            .ok_or_else(|| crate::CommunityError::Input(format!("community {id} has no input")))?;
        if c.id != id || c.level != level {
            return Err(crate::CommunityError::Input(format!(
                "the input made for community {id} of level {level} is community {} of level {}",
                c.id, c.level
            )));
        }
        Ok(c)
    };
    let mut done: HashMap<usize, Report> = HashMap::new();
    for (&level, ids) in by_level.iter_mut().rev() {
        ids.sort_unstable();
        let (made, done_below, level_of) = (&made, &done, &level_of);
        let written: Vec<Result<(usize, Report)>> = stream::iter(ids.iter().copied())
            .map(|id| async move {
                let c = made(id, level)?;
                // The sub-communities exactly one level deeper, as `generate_reports_by_level` finds them.
                let context = pack_context_with(
                    &c,
                    || {
                        c.sub_communities
                            .iter()
                            .filter(|s| level_of.get(s) == Some(&(level + 1)))
                            .filter_map(|&s| {
                                let report = done_below.get(&s)?;
                                Some((made(s, level + 1).ok()?, report))
                            })
                            .collect()
                    },
                    budget,
                );
                let hash = input_hash(&c, &context);
                let r = reuse_or_write(&c, &context, hash, previous, chat, text).await?;
                Ok((id, r))
            })
            .buffered(concurrency.max(1))
            .collect()
            .await;
        for w in written {
            let (id, r) = w?;
            done.insert(id, r);
        }
    }
    Ok(done.into_iter().collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn entity<'a>(name: &'a str, degree: usize, description: &'a str) -> ReportEntity<'a> {
        ReportEntity {
            name: name.into(),
            entity_type: "PERSON".into(),
            description: description.into(),
            degree,
        }
    }

    fn relation<'a>(source: &'a str, target: &'a str, rank: usize) -> ReportRelation<'a> {
        ReportRelation {
            source: source.into(),
            target: target.into(),
            description: format!("{source} knows {target}").into(),
            rank,
        }
    }

    #[test]
    fn tables_are_sorted_by_degree_and_rank_with_name_ties() {
        let c = CommunityInput {
            id: 1,
            entities: vec![
                entity("B", 1, "b"),
                entity("C", 2, "c"),
                entity("A", 1, "a"),
            ],
            relations: vec![
                relation("A", "B", 2),
                relation("B", "C", 3),
                relation("A", "C", 3),
            ],
            ..CommunityInput::default()
        };
        let text = pack_context(&c, &HashMap::new(), &HashMap::new(), 1000);
        assert_eq!(
            text,
            "-----Entities-----\n```csv\n\"id\",\t\"entity\",\t\"type\",\t\"description\",\t\"degree\"\n\
             0,\t\"C\",\t\"PERSON\",\t\"c\",\t2\n1,\t\"A\",\t\"PERSON\",\t\"a\",\t1\n\
             2,\t\"B\",\t\"PERSON\",\t\"b\",\t1\n```\n\n\
             -----Relationships-----\n```csv\n\"id\",\t\"source\",\t\"target\",\t\"description\",\t\"rank\"\n\
             0,\t\"A\",\t\"C\",\t\"A knows C\",\t3\n1,\t\"B\",\t\"C\",\t\"B knows C\",\t3\n\
             2,\t\"A\",\t\"B\",\t\"A knows B\",\t2\n```"
        );
        // Half the budget each: with 4 tokens, two one-token descriptions fit, the third does not.
        let cut = pack_context(&c, &HashMap::new(), &HashMap::new(), 4);
        assert!(
            cut.contains("\"A\",\t\"PERSON\"") && !cut.contains("\"B\",\t\"PERSON\""),
            "{cut}"
        );
    }

    #[test]
    fn replies_parse_tolerantly() {
        let r = parse_report(
            "Here it is:\n```json\n{\"title\": \" T \", \"summary\": \"S\", \"rating\": \"7.5\", \
             \"rating_explanation\": \"E\", \"findings\": [{\"summary\": \"F\", \"explanation\": \"X\"}, \
             {\"explanation\": \"no summary\"}],}\n```",
        )
        .unwrap();
        assert_eq!(
            (r.title.as_str(), r.summary.as_str(), r.rating),
            ("T", "S", 7.5)
        );
        assert_eq!(r.rating_explanation, "E");
        assert_eq!(
            r.findings.len(),
            1,
            "a finding without a summary is skipped"
        );
        // Python-literal form, out-of-range and non-numeric ratings.
        let r =
            parse_report("{'title': 'T', 'summary': 'S', 'rating': 42, 'findings': []}").unwrap();
        assert_eq!(r.rating, 10.0);
        let r =
            parse_report("{\"title\": \"T\", \"summary\": \"S\", \"rating\": \"high\"}").unwrap();
        assert_eq!((r.rating, r.findings.len()), (0.0, 0));
        // Unusable replies say why.
        for (reply, why) in [
            ("no json here", "no JSON object"),
            ("{\"title\": \"\", \"summary\": \"S\"}", "must not be empty"),
            ("{\"title\": \"T\", \"summary\": @}", "does not parse"),
        ] {
            let e = parse_report(reply).unwrap_err();
            assert!(e.contains(why), "{reply}: {e}");
        }
    }

    #[test]
    fn reports_render_as_the_reference_does() {
        let r = Report {
            title: "T".into(),
            summary: "S".into(),
            findings: vec![
                Finding {
                    summary: "F1".into(),
                    explanation: "X1".into(),
                },
                Finding {
                    summary: "F2".into(),
                    explanation: "X2".into(),
                },
            ],
            ..Report::default()
        };
        assert_eq!(r.render(), "# T\n\nS\n\n## F1\n\nX1\n\n## F2\n\nX2");
    }

    #[test]
    fn the_refill_puts_relations_the_sub_communities_hold_last() {
        // Sub-community 1 holds A; its relations include the edge A–X leaving it (spec §6.2), so the
        // parent's refill lists the uncovered Y–Z first although A–X ranks higher.
        let long = "word ".repeat(300);
        let sub = CommunityInput {
            id: 1,
            level: 1,
            entities: vec![entity("A", 3, "a")],
            relations: vec![relation("A", "X", 10)],
            occurrence: 1.0,
            ..CommunityInput::default()
        };
        let parent = CommunityInput {
            id: 0,
            entities: vec![
                entity("A", 3, &long),
                entity("X", 1, "x"),
                entity("Y", 1, "y"),
                entity("Z", 1, "z"),
            ],
            relations: vec![relation("A", "X", 10), relation("Y", "Z", 1)],
            sub_communities: vec![1],
            ..CommunityInput::default()
        };
        let communities = HashMap::from([(1, &sub)]);
        let report = Report {
            title: "Sub".into(),
            summary: "S".into(),
            rating: 7.0,
            ..Report::default()
        };
        let reports = HashMap::from([(1, report)]);
        let ctx = pack_context(&parent, &communities, &reports, 400);
        assert!(ctx.starts_with("-----Reports-----"), "{ctx}");
        assert!(ctx.contains(",\t7.0,\t1.0\n"), "Python float forms: {ctx}");
        let yz = ctx.find("\"Y knows Z\"").unwrap();
        let ax = ctx.find("\"A knows X\"").unwrap();
        assert!(yz < ax, "{ctx}");
        // The uncovered entities come before A (which does not fit anyway).
        assert!(!ctx.contains(&long));
    }

    #[tokio::test]
    async fn extractive_reports_read_sep_joined_descriptions_as_parts() {
        let c = CommunityInput {
            id: 4,
            entities: vec![
                entity(
                    "ADA",
                    2,
                    "Ada wrote notes on the engine.<SEP>Ada met Bob in London.",
                ),
                entity("BOB", 1, "Bob built the engine."),
            ],
            ..CommunityInput::default()
        };
        let text = ExtractiveSummarizer::new(
            std::sync::Arc::new(kgrag_types::testing::HashingEmbedder::new(32)),
            Encoding::O200kBase,
        );
        let r = extractive_report(&c, &text).await.unwrap();
        assert_eq!(r.title, "Community 4: ADA, BOB");
        assert_eq!(r.findings[0].explanation, "Ada wrote notes on the engine.");
        assert_eq!(r.findings[1].explanation, "Bob built the engine.");
        assert!(!r.summary.contains("<SEP>") && r.summary.contains("Bob built the engine."));
        assert_eq!((r.rating, r.outcome), (0.0, Outcome::Extractive));
    }

    #[test]
    fn the_input_hash_ignores_member_order_only() {
        let a = CommunityInput {
            level: 1,
            entities: vec![entity("A", 1, "a"), entity("B", 1, "b")],
            ..CommunityInput::default()
        };
        let mut b = a.clone();
        b.entities.reverse();
        assert_eq!(input_hash(&a, "ctx"), input_hash(&b, "ctx"));
        assert_ne!(input_hash(&a, "ctx"), input_hash(&a, "ctx2"));
        b.level = 2;
        assert_ne!(input_hash(&a, "ctx"), input_hash(&b, "ctx"));
        // Names are delimited: ["AB"] is not ["A", "B"].
        let mut c = a.clone();
        c.entities = vec![entity("AB", 1, "")];
        assert_ne!(input_hash(&a, "ctx"), input_hash(&c, "ctx"));
    }
}
