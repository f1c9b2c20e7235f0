//! Entity–relation extraction of the GraphRAG family, as HiRAG and LeanRAG run it (spec `hirag.md` §4.2–§4.5):
//! entities with type and description (stage A), then described, weighted relations among them (stage B), each
//! stage with gleaning rounds; records in the reference's delimiter format; merging across chunks.
//!
//! Prompt wording and few-shot examples are ours; delimiters and record formats are the reference's.
//!
//! ```
//! use kgrag_openie::{GraphRagConfig, GraphRagExtractor};
//! use kgrag_types::testing::ScriptedChatModel;
//! use kgrag_types::{Chunk, ChunkId, DocId, Extractor, Span};
//!
//! let model = ScriptedChatModel::new([
//!     r#"("entity"<|>ADA<|>PERSON<|>A mathematician.)##("entity"<|>LONDON<|>GEO<|>A city.)<|COMPLETE|>"#,
//!     "",  // nothing more after the gleaning turn
//!     r#"("relationship"<|>ADA<|>LONDON<|>Ada lived in London.<|>7)<|COMPLETE|>"#,
//!     "",
//! ]);
//! let text = "Ada lived in London.";
//! let chunk = Chunk { id: ChunkId::from_content(text), doc_id: DocId::from_text(text), text: text.into(),
//!                     tokens: 5, order: 0, span: Span::default() };
//! let extractor = GraphRagExtractor::new(&model, GraphRagConfig::default());
//! let extraction = tokio::runtime::Builder::new_current_thread().build().unwrap()
//!     .block_on(extractor.extract(&chunk))?;
//! assert_eq!(extraction.entities.len(), 2);
//! assert_eq!(extraction.relations[0].weight, 7.0);
//! # Ok::<(), kgrag_types::Error>(())
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};

use async_trait::async_trait;
use kgrag_text::Encoding;
use kgrag_types::{
    ChatModel, ChatRequest, ChatResponse, Chunk, ChunkId, Entity, Extraction, Extractor,
    GenerationSettings, IssueSeverity, Message, ParseIssue, Relation, Summarizer, SummaryRequest,
    VecSet,
};
use serde::{Deserialize, Serialize};

/// Separates fields of a record.
pub const TUPLE_DELIMITER: &str = "<|>";
/// Separates records.
pub const RECORD_DELIMITER: &str = "##";
/// Ends the output.
pub const COMPLETION_DELIMITER: &str = "<|COMPLETE|>";
/// Joins merged descriptions.
pub const MERGE_SEPARATOR: &str = "<SEP>";

/// How gleaning rounds are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gleaning {
    /// The reference: `max_gleaning` "add what you missed" turns, unconditionally.
    Always,
    /// Later reference: ask YES/NO whether anything was missed first; continue only on "yes".
    Gated,
}

/// Settings of the entity–relation extractor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphRagConfig {
    /// Entity types offered to the model.
    pub entity_types: Vec<String>,
    /// Gleaning rounds per stage.
    pub max_gleaning: usize,
    /// How gleaning is run.
    pub gleaning: Gleaning,
    /// Generation settings of every call.
    pub settings: GenerationSettings,
}

impl Default for GraphRagConfig {
    fn default() -> Self {
        Self {
            entity_types: ["organization", "person", "geo", "event", "category"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            max_gleaning: 1,
            gleaning: Gleaning::Always,
            settings: GenerationSettings {
                temperature: Some(0.0),
                ..GenerationSettings::default()
            },
        }
    }
}

const ENTITY_EXAMPLE_TEXT: &str = "Captain Ilse Varga steered the research vessel Northwind out of Tromsø \
harbour at dawn. The Arctic Survey Office had ordered the voyage after the ice-core results from Svalbard.";

fn entity_example() -> String {
    let d = TUPLE_DELIMITER;
    let r = RECORD_DELIMITER;
    [
        format!("(\"entity\"{d}ILSE VARGA{d}PERSON{d}Ilse Varga is the captain who steers the research vessel Northwind out of Tromsø.)"),
        format!("(\"entity\"{d}NORTHWIND{d}CATEGORY{d}Northwind is a research vessel leaving Tromsø harbour.)"),
        format!("(\"entity\"{d}TROMSØ{d}GEO{d}Tromsø is the harbour the Northwind leaves at dawn.)"),
        format!("(\"entity\"{d}ARCTIC SURVEY OFFICE{d}ORGANIZATION{d}The Arctic Survey Office ordered the voyage.)"),
        format!("(\"entity\"{d}SVALBARD{d}GEO{d}Svalbard is where the ice-core results came from.)"),
    ]
    .join(&format!("\n{r}\n"))
        + &format!("\n{COMPLETION_DELIMITER}")
}

fn relation_example() -> String {
    let d = TUPLE_DELIMITER;
    let r = RECORD_DELIMITER;
    [
        format!("(\"relationship\"{d}ILSE VARGA{d}NORTHWIND{d}Ilse Varga captains and steers the Northwind.{d}9)"),
        format!("(\"relationship\"{d}NORTHWIND{d}TROMSØ{d}The Northwind sails out of Tromsø harbour.{d}7)"),
        format!("(\"relationship\"{d}ARCTIC SURVEY OFFICE{d}NORTHWIND{d}The Arctic Survey Office ordered the Northwind's voyage.{d}8)"),
        format!("(\"relationship\"{d}ARCTIC SURVEY OFFICE{d}SVALBARD{d}The office acted on ice-core results from Svalbard.{d}5)"),
    ]
    .join(&format!("\n{r}\n"))
        + &format!("\n{COMPLETION_DELIMITER}")
}

fn entity_prompt(types: &str, text: &str) -> String {
    let d = TUPLE_DELIMITER;
    let r = RECORD_DELIMITER;
    format!(
        "Task: find every entity in the text below whose type is one of [{types}].\n\
         For each entity write one record (\"entity\"{d}<NAME in capitals>{d}<TYPE>{d}<a full description of the \
         entity and what it does in the text>).\n\
         Separate records with {r} and write {COMPLETION_DELIMITER} when you are done.\n\n\
         Example text:\n{ENTITY_EXAMPLE_TEXT}\nExample output:\n{}\n\n\
         Text:\n{text}\nOutput:\n",
        entity_example()
    )
}

fn relation_prompt(names: &str, text: &str) -> String {
    let d = TUPLE_DELIMITER;
    let r = RECORD_DELIMITER;
    format!(
        "Task: among these entities of the text below: [{names}], find every pair that is clearly related.\n\
         For each pair write one record (\"relationship\"{d}<SOURCE>{d}<TARGET>{d}<how and why they are related>{d}\
         <strength, a number from 1 to 10>).\n\
         Separate records with {r} and write {COMPLETION_DELIMITER} when you are done.\n\n\
         Example text:\n{ENTITY_EXAMPLE_TEXT}\nExample output:\n{}\n\n\
         Text:\n{text}\nOutput:\n",
        relation_example()
    )
}

/// The text every call of the two stages sends besides the chunk (and, in stage B, the entity names):
/// the entity and relation prompts rendered with an empty text, and the gleaning and continue turns.
/// For cost estimates; the exact request also carries the chunk.
pub fn prompt_templates(config: &GraphRagConfig) -> [String; 4] {
    [
        entity_prompt(&config.entity_types.join(","), ""),
        relation_prompt("", ""),
        GLEAN_PROMPT.to_owned(),
        CONTINUE_PROMPT.to_owned(),
    ]
}

const GLEAN_PROMPT: &str =
    "Many entities were missed in the last answer. Add them below, in the same format.";
const GLEAN_RELATIONS_PROMPT: &str =
    "Many relationships were missed in the last answer. Add them below, in the same format.";
const CONTINUE_PROMPT: &str =
    "Were any entities or relationships still missed? Answer with a single word, YES or NO.";

/// One parsed record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// `("entity"<|>NAME<|>TYPE<|>DESCRIPTION)`
    Entity {
        /// Cleaned, upper-cased name.
        name: String,
        /// Cleaned, upper-cased type.
        entity_type: String,
        /// Cleaned description.
        description: String,
    },
    /// `("relationship"<|>SOURCE<|>TARGET<|>DESCRIPTION<|>STRENGTH)`
    Relation {
        /// Cleaned, upper-cased source name.
        source: String,
        /// Cleaned, upper-cased target name.
        target: String,
        /// Cleaned description.
        description: String,
        /// Strength; 1.0 when the last field is not a number.
        weight: f64,
    },
}

fn html_unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// HTML-unescapes, drops control characters U+0000–001F and U+007F–009F, trims, and strips one pair of
/// surrounding double quotes.
fn clean(s: &str) -> String {
    let unescaped = html_unescape(s);
    let kept: String = unescaped
        .chars()
        .filter(|c| !(('\u{0}'..='\u{1f}').contains(c) || ('\u{7f}'..='\u{9f}').contains(c)))
        .collect();
    let t = kept.trim();
    t.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(t)
        .trim()
        .to_owned()
}

/// HiRAG's name normalisation (spec hirag §4.3): cleaned as the parser cleans record fields (HTML
/// entities unescaped, control characters dropped, trimmed, one pair of surrounding double quotes stripped),
/// then upper-cased. Idempotent, so names the parser already produced pass through unchanged.
pub fn normalise_name(s: &str) -> String {
    clean(s).to_uppercase()
}

fn is_number(s: &str) -> bool {
    let t = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (int, frac) = match t.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (t, None),
    };
    match frac {
        Some(f) => {
            !f.is_empty()
                && f.chars().all(|c| c.is_ascii_digit())
                && int.chars().all(|c| c.is_ascii_digit())
        }
        None => !int.is_empty() && int.chars().all(|c| c.is_ascii_digit()),
    }
}

/// Parses delimiter-format output into records; malformed records go to `issues`.
pub fn parse_records(output: &str, stage: &str, issues: &mut Vec<ParseIssue>) -> Vec<Record> {
    let mut records = Vec::new();
    for raw in output
        .split(RECORD_DELIMITER)
        .flat_map(|r| r.split(COMPLETION_DELIMITER))
    {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let (Some(open), Some(close)) = (raw.find('('), raw.rfind(')')) else {
            issues.push(ParseIssue {
                stage: stage.into(),
                severity: IssueSeverity::Skipped,
                message: "record without parentheses".into(),
                excerpt: raw.chars().take(200).collect(),
            });
            continue;
        };
        if close <= open {
            continue;
        }
        let fields: Vec<&str> = raw[open + 1..close].split(TUPLE_DELIMITER).collect();
        let kind = clean(fields[0]).to_lowercase();
        if kind == "entity" && fields.len() >= 4 {
            let name = clean(fields[1]).to_uppercase();
            if name.is_empty() {
                continue;
            }
            records.push(Record::Entity {
                name,
                entity_type: clean(fields[2]).to_uppercase(),
                description: clean(fields[3]),
            });
        } else if kind == "relationship" && fields.len() >= 5 {
            let source = clean(fields[1]).to_uppercase();
            let target = clean(fields[2]).to_uppercase();
            if source.is_empty() || target.is_empty() {
                continue;
            }
            let last = clean(fields[fields.len() - 1]);
            // A number too large for f64 (`1e400`, 400 digits) parses to infinity: the default instead.
            let parsed = is_number(&last).then(|| last.parse::<f64>().ok()).flatten();
            let weight = match parsed {
                Some(w) if w.is_finite() => w,
                Some(_) => {
                    issues.push(ParseIssue {
                        stage: stage.into(),
                        severity: IssueSeverity::Repaired,
                        message: "relation weight out of range; 1.0 used".into(),
                        excerpt: raw.chars().take(200).collect(),
                    });
                    1.0
                }
                None => 1.0,
            };
            records.push(Record::Relation {
                source,
                target,
                description: clean(fields[3]),
                weight,
            });
        } else {
            issues.push(ParseIssue {
                stage: stage.into(),
                severity: IssueSeverity::Skipped,
                message: format!("unrecognised record with {} fields", fields.len()),
                excerpt: raw.chars().take(200).collect(),
            });
        }
    }
    records
}

/// The entity–relation extractor over any [`ChatModel`].
pub struct GraphRagExtractor<M> {
    model: M,
    config: GraphRagConfig,
}

impl<M: ChatModel> GraphRagExtractor<M> {
    /// An extractor with `config`.
    pub fn new(model: M, config: GraphRagConfig) -> Self {
        Self { model, config }
    }

    async fn call(
        &self,
        messages: &[Message],
        extraction: &mut Extraction,
    ) -> kgrag_types::Result<ChatResponse> {
        let response = self
            .model
            .chat(&ChatRequest {
                messages: messages.to_vec(),
                settings: self.config.settings.clone(),
            })
            .await?;
        extraction.diagnostics.llm_calls += 1;
        extraction.diagnostics.prompt_tokens += response.usage.prompt_tokens;
        extraction.diagnostics.completion_tokens += response.usage.completion_tokens;
        Ok(response)
    }

    /// Runs one stage: the first prompt, then gleaning rounds; returns all answers joined.
    async fn stage(
        &self,
        prompt: String,
        glean: &str,
        extraction: &mut Extraction,
    ) -> kgrag_types::Result<String> {
        let mut messages = vec![Message::user(prompt)];
        let first = self.call(&messages, extraction).await?;
        let mut text = first.content.clone();
        messages.push(Message::assistant(first.content));
        for _ in 0..self.config.max_gleaning {
            if self.config.gleaning == Gleaning::Gated {
                let mut ask = messages.clone();
                ask.push(Message::user(CONTINUE_PROMPT));
                let answer = self.call(&ask, extraction).await?;
                let verdict = answer
                    .content
                    .trim()
                    .trim_matches(['"', '\''])
                    .trim()
                    .to_lowercase();
                if verdict != "yes" {
                    break;
                }
            }
            messages.push(Message::user(glean));
            let more = self.call(&messages, extraction).await?;
            text.push_str(&more.content);
            messages.push(Message::assistant(more.content));
        }
        Ok(text)
    }
}

#[async_trait]
impl<M: ChatModel> Extractor for GraphRagExtractor<M> {
    fn fingerprint(&self) -> String {
        let probe = format!(
            "{}|{}|{GLEAN_PROMPT}|{GLEAN_RELATIONS_PROMPT}|{CONTINUE_PROMPT}|{}",
            entity_prompt("", ""),
            relation_prompt("", ""),
            serde_json::to_string(&self.config).unwrap_or_default()
        );
        format!(
            "graphrag-er-v1:{}:{}",
            self.model.model_name(),
            kgrag_types::md5_hex(probe.as_bytes())
        )
    }

    async fn extract(&self, chunk: &Chunk) -> kgrag_types::Result<Extraction> {
        let mut extraction = Extraction::empty(chunk.id.clone());
        let sources: VecSet<_> = [chunk.id.clone()].into_iter().collect();
        let types = self.config.entity_types.join(",");
        let a = self
            .stage(
                entity_prompt(&types, &chunk.text),
                GLEAN_PROMPT,
                &mut extraction,
            )
            .await?;
        let mut issues = Vec::new();
        for record in parse_records(&a, "entities", &mut issues) {
            if let Record::Entity {
                name,
                entity_type,
                description,
            } = record
            {
                extraction.entities.push(Entity {
                    name,
                    entity_type,
                    description,
                    source_chunks: sources.clone(),
                });
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for e in &extraction.entities {
            if !names.contains(&e.name.as_str()) {
                names.push(&e.name);
            }
        }
        let names = names.join(",");
        let b = self
            .stage(
                relation_prompt(&names, &chunk.text),
                GLEAN_RELATIONS_PROMPT,
                &mut extraction,
            )
            .await?;
        // Entity records emitted in stage B are discarded, as the reference does.
        for record in parse_records(&b, "relations", &mut issues) {
            if let Record::Relation {
                source,
                target,
                description,
                weight,
            } = record
            {
                extraction.relations.push(Relation {
                    source,
                    target,
                    keywords: String::new(),
                    description,
                    weight,
                    source_chunks: sources.clone(),
                });
            }
        }
        extraction.diagnostics.issues.extend(issues);
        Ok(extraction)
    }
}

/// Entities merged across chunks by name: the most frequent type (ties: first seen), descriptions as the
/// sorted set joined by `<SEP>`, sources united. In first-seen order ([`EntityMerger`] with a copy of
/// each record).
pub fn merge_entities<'a>(records: impl IntoIterator<Item = &'a Entity>) -> Vec<Entity> {
    let mut merger = EntityMerger::new();
    for e in records {
        merger.add(e.clone());
    }
    merger.finish()
}

/// [`merge_entities`] record by record, owning each: its strings move into the merge, so a caller that
/// gives records up as it goes never holds them next to the merged entities.
#[derive(Debug, Default)]
pub struct EntityMerger {
    /// Each name's place in `groups` (first-seen order).
    index: HashMap<String, usize>,
    groups: Vec<EntityGroup>,
}

/// One name's records as they are merged.
#[derive(Debug, Default)]
struct EntityGroup {
    /// Types with their record counts, in first-seen order.
    types: Vec<(String, usize)>,
    /// The records' non-empty descriptions (split, sorted and deduplicated at the end).
    descriptions: Vec<String>,
    sources: VecSet<ChunkId>,
}

impl EntityMerger {
    /// An empty merge.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a record.
    pub fn add(&mut self, e: Entity) {
        let Entity {
            name,
            entity_type,
            description,
            source_chunks,
        } = e;
        let i = match self.index.get(&name) {
            Some(&i) => i,
            None => {
                self.groups.push(EntityGroup::default());
                self.index.insert(name, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        let g = &mut self.groups[i];
        match g.types.iter_mut().find(|(t, _)| *t == entity_type) {
            Some((_, n)) => *n += 1,
            None => g.types.push((entity_type, 1)),
        }
        if !description.is_empty() {
            g.descriptions.push(description);
        }
        g.sources.extend(source_chunks);
    }

    /// The merged entities, in first-seen order.
    pub fn finish(self) -> Vec<Entity> {
        let mut names = vec![String::new(); self.groups.len()];
        for (name, i) in self.index {
            names[i] = name;
        }
        self.groups
            .into_iter()
            .zip(names)
            .map(|(g, name)| {
                let best = g.types.iter().map(|(_, n)| *n).max().unwrap_or(0);
                let entity_type = g
                    .types
                    .into_iter()
                    .find(|(_, n)| *n == best)
                    .map(|(t, _)| t)
                    .unwrap_or_default();
                Entity {
                    name,
                    entity_type,
                    description: sorted_parts(&g.descriptions),
                    source_chunks: g.sources,
                }
            })
            .collect()
    }
}

/// The distinct non-empty `<SEP>` parts of `descriptions`, sorted, joined by `<SEP>`.
fn sorted_parts(descriptions: &[String]) -> String {
    let mut parts: Vec<&str> = descriptions
        .iter()
        .flat_map(|d| d.split(MERGE_SEPARATOR))
        .filter(|d| !d.is_empty())
        .collect();
    parts.sort_unstable();
    parts.dedup();
    parts.join(MERGE_SEPARATOR)
}

/// Relations merged across chunks by unordered pair (the graph is undirected; the pair is stored sorted):
/// weights summed, descriptions as the sorted set joined by `<SEP>`, sources united; the keywords of the
/// pair's first record. Sorted by pair ([`RelationMerger`] with a copy of each record).
pub fn merge_relations<'a>(records: impl IntoIterator<Item = &'a Relation>) -> Vec<Relation> {
    let mut merger = RelationMerger::new();
    for r in records {
        merger.add(r.clone());
    }
    merger.finish()
}

/// [`merge_relations`] record by record, owning each (see [`EntityMerger`]).
#[derive(Debug, Default)]
pub struct RelationMerger {
    merged: BTreeMap<(String, String), RelationGroup>,
}

/// One pair's records as they are merged.
#[derive(Debug)]
struct RelationGroup {
    keywords: String,
    weight: f64,
    sources: VecSet<ChunkId>,
    /// The records' non-empty descriptions (split, sorted and deduplicated at the end).
    descriptions: Vec<String>,
}

impl RelationMerger {
    /// An empty merge.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a record.
    pub fn add(&mut self, r: Relation) {
        let Relation {
            source,
            target,
            keywords,
            description,
            weight,
            source_chunks,
        } = r;
        let key = if source <= target {
            (source, target)
        } else {
            (target, source)
        };
        let g = match self.merged.entry(key) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => v.insert(RelationGroup {
                keywords,
                weight: 0.0,
                sources: VecSet::new(),
                descriptions: Vec::new(),
            }),
        };
        g.weight += weight;
        g.sources.extend(source_chunks);
        if !description.is_empty() {
            g.descriptions.push(description);
        }
    }

    /// The merged relations, sorted by pair.
    pub fn finish(self) -> Vec<Relation> {
        self.merged
            .into_iter()
            .map(|((source, target), g)| Relation {
                source,
                target,
                keywords: g.keywords,
                description: sorted_parts(&g.descriptions),
                weight: g.weight,
                source_chunks: g.sources,
            })
            .collect()
    }
}

/// Adds an entity of type `UNKNOWN` for every relation endpoint that no entity names, carrying the relation's
/// description and sources (the reference creates such nodes when it upserts an edge). Returns how many.
pub fn add_missing_endpoints(entities: &mut Vec<Entity>, relations: &[Relation]) -> usize {
    let mut known: BTreeSet<String> = entities.iter().map(|e| e.name.clone()).collect();
    let before = entities.len();
    for r in relations {
        for name in [&r.source, &r.target] {
            if known.insert(name.clone()) {
                entities.push(Entity {
                    name: name.clone(),
                    entity_type: "UNKNOWN".to_owned(),
                    description: r.description.clone(),
                    source_chunks: r.source_chunks.clone(),
                });
            }
        }
    }
    entities.len() - before
}

/// Replaces descriptions of `trigger_tokens` o200k tokens or more with a summary (`max_tokens` 500), through
/// any [`Summarizer`] — an LLM, or the extractive one of an offline run. Returns how many were summarised.
pub async fn summarise_long_descriptions(
    entities: &mut [Entity],
    relations: &mut [Relation],
    summarizer: &dyn Summarizer,
    trigger_tokens: usize,
) -> kgrag_types::Result<usize> {
    let subjects_and_descriptions = entities
        .iter_mut()
        .map(|e| (e.name.clone(), &mut e.description))
        .chain(
            relations
                .iter_mut()
                .map(|r| (format!("{} -> {}", r.source, r.target), &mut r.description)),
        );
    let mut n = 0;
    for (subject, description) in subjects_and_descriptions {
        if Encoding::O200kBase.count(description).unwrap_or(0) < trigger_tokens {
            continue;
        }
        *description = summarizer
            .summarize(&SummaryRequest {
                subject,
                descriptions: description
                    .split(MERGE_SEPARATOR)
                    .map(str::to_owned)
                    .collect(),
                max_tokens: 500,
                query: None,
            })
            .await?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_with_and_without_quotes() {
        let out = "(\"entity\"<|>\"Alex\"<|>person<|>Alex is a &quot;pilot&quot;.)##\n(entity<|>ORBIT CO<|>organization<|>A firm)\
                   ##(\"relationship\"<|>ALEX<|>ORBIT CO<|>Alex works there<|>7.5)##(\"relationship\"<|>A<|>B<|>d<|>high)\
                   ##(\"entity\"<|><|>x<|>y)##garbage<|COMPLETE|>";
        let mut issues = Vec::new();
        let records = parse_records(out, "entities", &mut issues);
        assert_eq!(
            records,
            vec![
                Record::Entity {
                    name: "ALEX".into(),
                    entity_type: "PERSON".into(),
                    description: "Alex is a \"pilot\".".into()
                },
                Record::Entity {
                    name: "ORBIT CO".into(),
                    entity_type: "ORGANIZATION".into(),
                    description: "A firm".into()
                },
                Record::Relation {
                    source: "ALEX".into(),
                    target: "ORBIT CO".into(),
                    description: "Alex works there".into(),
                    weight: 7.5
                },
                Record::Relation {
                    source: "A".into(),
                    target: "B".into(),
                    description: "d".into(),
                    weight: 1.0
                },
            ]
        );
        assert_eq!(issues.len(), 1, "{issues:?}");
    }
}
