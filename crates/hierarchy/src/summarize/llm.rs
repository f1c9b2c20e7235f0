//! The LLM cluster summariser: its prompts, the lenient parsing of its replies, the retry with a corrective turn and the extractive fallback.

use super::*;

/// Counts of the LLM summariser's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryStats {
    /// Chat calls made (including retries).
    pub calls: u64,
    /// Corrective retries.
    pub retries: u64,
    /// Summaries replaced by the extractive fallback.
    pub fallbacks: u64,
    /// Calls that returned an error.
    pub call_errors: u64,
    /// Replies that could not be used.
    pub unusable_replies: u64,
    /// Malformed records skipped inside otherwise usable replies.
    pub skipped_records: u64,
    /// Prompt tokens reported by the model.
    pub prompt_tokens: u64,
    /// Completion tokens reported by the model.
    pub completion_tokens: u64,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) calls: AtomicU64,
    pub(super) retries: AtomicU64,
    pub(super) fallbacks: AtomicU64,
    pub(super) call_errors: AtomicU64,
    pub(super) unusable: AtomicU64,
    pub(super) skipped: AtomicU64,
    pub(super) prompt_tokens: AtomicU64,
    pub(super) completion_tokens: AtomicU64,
}

/// Budgets of LeanRAG's aggregation input (cl100k tokens of descriptions per table).
/// LeanRAG's aggregation input budget (`aggregate_prompt_tokens`, cl100k): 6,000 entities + 6,000 relations.
pub const AGGREGATE_PROMPT_TOKENS: usize = 12_000;
/// HiRAG's cap on a cluster prompt's member text (cl100k); the builder subsamples above it.
pub const HIRAG_MAX_CLUSTER_TOKENS: usize = 60_000;

/// LLM cluster summaries with our own prompts (see the module docs for retries and fallbacks).
pub struct LlmClusterSummarizer {
    pub(super) chat: Arc<dyn ChatModel>,
    pub(super) fallback: ExtractiveClusterSummarizer,
    pub(super) settings: GenerationSettings,
    pub(super) counters: Counters,
}

impl std::fmt::Debug for LlmClusterSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClusterSummarizer")
            .field("chat", &self.chat.model_name())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What went wrong with one attempt.
pub(super) enum Attempt<T> {
    Ok(T),
    /// The reply could not be used; the text says why (sent back in the corrective turn).
    Unusable(String, String),
    /// The call failed.
    Failed,
}

impl LlmClusterSummarizer {
    /// A summariser calling `chat` at temperature 0, falling back to `fallback`.
    pub fn new(chat: Arc<dyn ChatModel>, fallback: ExtractiveClusterSummarizer) -> Self {
        Self {
            chat,
            fallback,
            settings: GenerationSettings {
                temperature: Some(0.0),
                ..GenerationSettings::default()
            },
            counters: Counters::default(),
        }
    }

    /// Replaces the generation settings (every call uses them; `response_format` is set per prompt).
    pub fn with_settings(mut self, settings: GenerationSettings) -> Self {
        self.settings = settings;
        self
    }

    /// What the summariser has done so far.
    pub fn stats(&self) -> SummaryStats {
        let c = &self.counters;
        SummaryStats {
            calls: c.calls.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            fallbacks: c.fallbacks.load(Ordering::Relaxed),
            call_errors: c.call_errors.load(Ordering::Relaxed),
            unusable_replies: c.unusable.load(Ordering::Relaxed),
            skipped_records: c.skipped.load(Ordering::Relaxed),
            prompt_tokens: c.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: c.completion_tokens.load(Ordering::Relaxed),
        }
    }

    pub(super) fn request(&self, messages: Vec<Message>, format: ResponseFormat) -> ChatRequest {
        let mut settings = self.settings.clone();
        settings.response_format = format;
        ChatRequest { messages, settings }
    }

    /// Runs a prompt with one corrective retry; `parse` turns a reply into a value or says why not.
    pub(super) async fn run<T>(
        &self,
        messages: Vec<Message>,
        format: ResponseFormat,
        parse: impl Fn(&str) -> std::result::Result<T, String>,
    ) -> Option<(T, Outcome)> {
        let mut messages = messages;
        for attempt in 0..2 {
            if attempt == 1 {
                self.counters.retries.fetch_add(1, Ordering::Relaxed);
            }
            let request = self.request(messages.clone(), format);
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            let result = match self.chat.chat(&request).await {
                Ok(reply) => {
                    self.counters
                        .prompt_tokens
                        .fetch_add(reply.usage.prompt_tokens, Ordering::Relaxed);
                    self.counters
                        .completion_tokens
                        .fetch_add(reply.usage.completion_tokens, Ordering::Relaxed);
                    match parse(&reply.content) {
                        Ok(v) => Attempt::Ok(v),
                        Err(why) => Attempt::Unusable(reply.content, why),
                    }
                }
                Err(_) => Attempt::Failed,
            };
            match result {
                Attempt::Ok(v) => {
                    let outcome = if attempt == 0 {
                        Outcome::Llm
                    } else {
                        Outcome::Retried
                    };
                    return Some((v, outcome));
                }
                Attempt::Unusable(reply, why) => {
                    self.counters.unusable.fetch_add(1, Ordering::Relaxed);
                    messages.push(Message::assistant(reply));
                    messages.push(Message::user(format!(
                        "That answer could not be used: {why}. Answer the original request again, exactly in \
                         the format it asks for and with nothing else."
                    )));
                }
                Attempt::Failed => {
                    self.counters.call_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
        None
    }
}

// ----- prompts (our own wording) -----

/// HiRAG attribute-entity prompt for one cluster.
pub fn attribute_prompt(request: &AttributeRequest) -> String {
    let t = TUPLE_DELIMITER;
    let r = RECORD_DELIMITER;
    let c = COMPLETION_DELIMITER;
    let types = request.entity_types.join(", ");
    let members: Vec<String> = request
        .members
        .iter()
        .map(|m| format!("({}, {})", m.name, m.description.replace(SEP, " ")))
        .collect();
    format!(
        "You are adding a more abstract layer to a knowledge graph. The entities below were grouped together \
because their descriptions are close.\n\n\
Task:\n\
1. Invent one or more attribute entities that summarise what the group shares. Each must be more general than the \
given entities, directly relevant to them, and typed with one of these meta attributes: [{types}]. Write each as\n\
(\"entity\"{t}<NAME IN CAPITALS>{t}<meta attribute>{t}<what it is and why the given entities belong to it>)\n\
2. For every given entity that clearly belongs to an attribute entity, write\n\
(\"relationship\"{t}<given entity name>{t}<attribute entity name>{t}<how they are connected>{t}<strength 1-10>)\n\
Never relate two attribute entities to each other.\n\
3. Separate records with {r} and finish with {c}. Write nothing else.\n\n\
Example\n\
Meta attributes: [location, organization]\n\
Entities: (ROTTERDAM PORT, the busiest seaport in Europe, at the mouth of the Rhine), (ANTWERP PORT, a Belgian \
port on the Scheldt estuary, second in Europe by cargo), (HAMBURG PORT, Germany's largest port, on the Elbe)\n\
Output:\n\
(\"entity\"{t}NORTH SEA RANGE{t}location{t}The stretch of North Sea coast where the largest container ports of \
Europe cluster, each at the mouth of a major river.){r}\n\
(\"relationship\"{t}ROTTERDAM PORT{t}NORTH SEA RANGE{t}Rotterdam is the leading port of the North Sea range.{t}9){r}\n\
(\"relationship\"{t}ANTWERP PORT{t}NORTH SEA RANGE{t}Antwerp reaches the North Sea range through the Scheldt.{t}8){r}\n\
(\"relationship\"{t}HAMBURG PORT{t}NORTH SEA RANGE{t}Hamburg is the range's north-eastern end, on the Elbe.{t}8)\n\
{c}\n\n\
Meta attributes: [{types}]\n\
Entities: {}\n\
Output:\n",
        members.join(", ")
    )
}

/// HiRAG: the attribute entities and relations of a cluster from a summariser's delimiter-record reply
/// (entities de-duplicated by name, relations by unordered pair, self-relations dropped), or why the reply
/// is unusable: no entity record for the `members` summarised.
pub fn parse_attribute_reply(
    reply: &str,
    members: &[Member],
) -> std::result::Result<AttributeSummary, String> {
    let mut issues = Vec::new();
    let records = parse_records(reply, "cluster summary", &mut issues);
    let mut out = AttributeSummary {
        skipped_records: issues
            .iter()
            .filter(|i| i.severity == kgrag_types::IssueSeverity::Skipped)
            .count(),
        ..AttributeSummary::default()
    };
    let mut pairs = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    for rec in records {
        match rec {
            Record::Entity {
                name,
                entity_type,
                description,
            } => {
                if names.insert(name.clone()) {
                    out.entities.push(SummaryEntity {
                        name,
                        entity_type,
                        description,
                    });
                }
            }
            Record::Relation {
                source,
                target,
                description,
                weight,
            } => {
                let key = if source <= target {
                    (source.clone(), target.clone())
                } else {
                    (target.clone(), source.clone())
                };
                if source != target && pairs.insert(key) {
                    out.relations.push(SummaryRelation {
                        source,
                        target,
                        description,
                        strength: weight,
                    });
                }
            }
        }
    }
    if out.entities.is_empty() {
        return Err(format!(
            "it holds no (\"entity\"{TUPLE_DELIMITER}…) record for the {} given entities",
            members.len()
        ));
    }
    Ok(out)
}

pub(super) fn count_tokens(text: &str) -> usize {
    Encoding::Cl100kBase
        .count(text)
        .unwrap_or_else(|_| text.split_whitespace().count())
}

/// LeanRAG aggregation input: the entity and relationship tables, each truncated to half of the request's
/// budget in description tokens (cl100k; 6,000 each by default; a table keeps at least its first row, so
/// an oversized description is still shown). Entities by degree (desc, ties name); relations by rank (desc, ties description).
pub fn aggregate_tables(request: &AggregateRequest) -> String {
    let table_tokens = request.prompt_tokens.unwrap_or(AGGREGATE_PROMPT_TOKENS) / 2;
    let mut members: Vec<&Member> = request.members.iter().collect();
    members.sort_by(|a, b| b.degree.cmp(&a.degree).then_with(|| a.name.cmp(&b.name)));
    let mut used = 0;
    let mut rows = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let description = m.description.replace(SEP, " ");
        used += count_tokens(&description);
        if used > table_tokens && !rows.is_empty() {
            break;
        }
        rows.push(vec![
            Cell::num(i),
            Cell::Text(m.name.clone()),
            Cell::Text(m.entity_type.clone()),
            Cell::Text(description),
            Cell::num(m.degree),
        ]);
    }
    let entities = csv_table(
        "Entities",
        &["id", "entity", "type", "description", "degree"],
        &rows,
    );
    let mut relations: Vec<&RelationRow> = request.relations.iter().collect();
    relations.sort_by(|a, b| {
        b.rank
            .cmp(&a.rank)
            .then_with(|| a.description.cmp(&b.description))
    });
    let mut used = 0;
    let mut rows = Vec::new();
    for (i, r) in relations.iter().enumerate() {
        used += count_tokens(&r.description);
        if used > table_tokens && !rows.is_empty() {
            break;
        }
        rows.push(vec![
            Cell::num(i),
            Cell::Text(r.source.clone()),
            Cell::Text(r.target.clone()),
            Cell::Text(r.description.clone()),
            Cell::num(r.rank),
        ]);
    }
    let relations = csv_table(
        "Relationships",
        &["id", "source", "target", "description", "rank"],
        &rows,
    );
    format!("{entities}\n\n{relations}")
}

/// LeanRAG aggregation messages (system role + tables + instructions).
pub fn aggregate_messages(request: &AggregateRequest) -> Vec<Message> {
    let system = "You are an entity aggregation analyst. You read a group of related entities from a knowledge \
graph and describe, as one new higher-level entity, what they have in common.";
    let user = format!(
        "{}\n\n\
Using only the data above, create one aggregate entity for the whole group.\n\
- entity_name: a short name for what the group shares; it must not repeat any entity name of the table.\n\
- entity_description: a paragraph on the traits, roles and connections the members share.\n\
- findings: five to ten insights about the group, each with a one-line summary and an explanation grounded \
in the tables.\n\
Reply with one JSON object and nothing else:\n\
{{\"entity_name\": \"...\", \"entity_description\": \"...\", \"findings\": [{{\"summary\": \"...\", \
\"explanation\": \"...\"}}]}}",
        aggregate_tables(request)
    );
    vec![Message::system(system), Message::user(user)]
}

pub(super) fn json_str(v: &serde_json::Value, key: &str) -> String {
    v.get(key)
        .and_then(|x| x.as_str())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// LeanRAG: the aggregate entity of a cluster from a summariser's JSON reply (`entity_name`,
/// `entity_description`), or why the reply is unusable (no such object, an empty name, a name that repeats
/// one of the `members`', …).
pub fn parse_aggregate_reply(
    reply: &str,
    members: &[Member],
) -> std::result::Result<AggregateSummary, String> {
    let unfenced = strip_fences(reply);
    let object = find_object_with_key(&unfenced, "entity_name")
        .ok_or("it holds no JSON object with an \"entity_name\" key")?;
    let value = parse_value(object).ok_or("its JSON object does not parse")?;
    let name = json_str(&value, "entity_name");
    let description = json_str(&value, "entity_description");
    if name.is_empty() {
        return Err("\"entity_name\" is empty".into());
    }
    let lower = name.to_lowercase();
    if members.iter().any(|m| m.name.to_lowercase() == lower) {
        return Err(format!(
            "\"entity_name\" {name:?} repeats a member's name; choose a new name"
        ));
    }
    if description.is_empty() {
        return Err("\"entity_description\" is empty".into());
    }
    let findings = value
        .get("findings")
        .and_then(|f| f.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|f| {
                    let summary = json_str(f, "summary");
                    let explanation = json_str(f, "explanation");
                    (!summary.is_empty() || !explanation.is_empty()).then_some(Finding {
                        summary,
                        explanation,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(AggregateSummary {
        name,
        description,
        findings,
        outcome: Outcome::Llm,
    })
}

pub(super) fn render_findings(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "(no findings)".into();
    }
    findings
        .iter()
        .map(|f| format!("{}: {}", f.summary, f.explanation))
        .collect::<Vec<_>>()
        .join("\n")
}

/// LeanRAG inter-aggregate relation messages.
pub fn relate_messages(request: &RelateRequest) -> Vec<Message> {
    let system = "You are an inter-aggregation relationship analyst. You explain in one sentence how two groups \
of knowledge-graph entities are connected.";
    let user = format!(
        "Group A: {}\n{}\n\nGroup B: {}\n{}\n\nRelations between members of A and members of B:\n{}\n\n\
Write exactly one sentence of at most {} words that states how group A and group B relate. Speak about the \
groups as wholes: do not name individual members, do not use the word \"community\", and do not copy the \
relation lines. Reply with the sentence only.",
        request.a.0,
        render_findings(&request.a.1),
        request.b.0,
        render_findings(&request.b.1),
        request.lines,
        request.word_limit
    );
    vec![Message::system(system), Message::user(user)]
}

/// LeanRAG: the one-sentence relation description of a summariser's reply, or why it is unusable.
pub fn parse_relation_reply(reply: &str) -> std::result::Result<String, String> {
    let line = reply
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or("the reply is empty")?;
    if line.contains("relationship<|>") || line.contains(TUPLE_DELIMITER) {
        return Err("it copies the relation lines instead of describing the relation".into());
    }
    Ok(line.to_owned())
}

#[async_trait]
impl ClusterSummarizer for LlmClusterSummarizer {
    fn fingerprint(&self) -> String {
        format!(
            "llm-clusters/v1/{}/{}",
            self.chat.model_name(),
            serde_json::to_string(&self.settings).unwrap_or_default()
        )
    }

    async fn attribute_entities(&self, request: &AttributeRequest) -> Result<AttributeSummary> {
        let messages = vec![Message::user(attribute_prompt(request))];
        match self
            .run(messages, ResponseFormat::Text, |reply| {
                parse_attribute_reply(reply, &request.members)
            })
            .await
        {
            Some((mut summary, outcome)) => {
                self.counters
                    .skipped
                    .fetch_add(summary.skipped_records as u64, Ordering::Relaxed);
                summary.outcome = outcome;
                Ok(summary)
            }
            None => {
                let mut s = self.fallback.attribute_entities(request).await?;
                s.outcome = Outcome::Fallback;
                Ok(s)
            }
        }
    }

    async fn aggregate(&self, request: &AggregateRequest) -> Result<AggregateSummary> {
        match self
            .run(
                aggregate_messages(request),
                ResponseFormat::JsonObject,
                |reply| parse_aggregate_reply(reply, &request.members),
            )
            .await
        {
            Some((mut summary, outcome)) => {
                summary.outcome = outcome;
                Ok(summary)
            }
            None => {
                let mut s = self.fallback.aggregate(request).await?;
                s.outcome = Outcome::Fallback;
                Ok(s)
            }
        }
    }

    async fn relate(&self, request: &RelateRequest) -> Result<RelateSummary> {
        match self
            .run(
                relate_messages(request),
                ResponseFormat::Text,
                parse_relation_reply,
            )
            .await
        {
            Some((text, outcome)) => Ok(RelateSummary { text, outcome }),
            None => {
                let mut s = self.fallback.relate(request).await?;
                s.outcome = Outcome::Fallback;
                Ok(s)
            }
        }
    }
}
