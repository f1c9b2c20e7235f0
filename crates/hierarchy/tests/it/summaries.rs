//! Cluster summarisers: the prompts the LLM summariser sends, parsing of good and broken replies, the
//! corrective retry and the extractive fallback; the extractive summariser on a small cluster.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kgrag_hierarchy::summarize::{aggregate_tables, attribute_prompt, group_name};
use kgrag_hierarchy::{
    AggregateRequest, AttributeRequest, ClusterSummarizer, ExtractiveClusterSummarizer, Finding,
    LlmClusterSummarizer, Member, Outcome, RelateRequest, RelationRow,
};
use kgrag_text::{Encoding, ExtractiveSummarizer};
use kgrag_types::testing::{HashingEmbedder, ScriptedChatModel};
use kgrag_types::{ResponseFormat, Role};

fn members() -> Vec<Member> {
    vec![
        Member {
            name: "RIVER ODRA".into(),
            entity_type: "LOCATION".into(),
            description: "The Odra flows north into the Baltic Sea. It forms part of the border.".into(),
            degree: 2,
        },
        Member {
            name: "RIVER VISTULA".into(),
            entity_type: "LOCATION".into(),
            description: "The Vistula is the longest river of Poland. It reaches the Baltic Sea at Gdańsk."
                .into(),
            degree: 5,
        },
        Member {
            name: "RIVER NEMAN".into(),
            entity_type: "LOCATION".into(),
            description: "The Neman drains into the Curonian Lagoon of the Baltic Sea.<SEP>The Neman crosses \
                          Belarus and Lithuania."
                .into(),
            degree: 2,
        },
        Member {
            name: "RIVER DAUGAVA".into(),
            entity_type: "LOCATION".into(),
            description: "The Daugava ends in the Gulf of Riga.".into(),
            degree: 1,
        },
    ]
}

fn extractive() -> ExtractiveClusterSummarizer {
    ExtractiveClusterSummarizer::new(Arc::new(ExtractiveSummarizer::new(
        Arc::new(HashingEmbedder::new(64)),
        Encoding::Cl100kBase,
    )))
}

fn attribute_request() -> AttributeRequest {
    AttributeRequest {
        layer: 0,
        members: members(),
        entity_types: vec!["location".into(), "organization".into()],
    }
}

const GOOD_ATTRIBUTES: &str =
    "(\"entity\"<|>BALTIC SEA BASIN<|>location<|>The drainage basin of the Baltic Sea.)##\n\
(\"relationship\"<|>RIVER ODRA<|>BALTIC SEA BASIN<|>The Odra drains into the Baltic.<|>9)##\n\
(\"relationship\"<|>RIVER VISTULA<|>BALTIC SEA BASIN<|>The Vistula drains into the Baltic.<|>9)##\n\
(\"relationship\"<|>BALTIC SEA BASIN<|>RIVER ODRA<|>duplicate pair, dropped<|>2)##\n\
(\"relationship\"<|>RIVER NEMAN<|>BALTIC SEA BASIN<|>The Neman drains into the Baltic.<|>eight)##\n\
(this record is malformed)##\n\
<|COMPLETE|>";

#[tokio::test]
async fn hirag_attribute_prompt_and_parse() {
    let chat = Arc::new(ScriptedChatModel::new([GOOD_ATTRIBUTES]));
    let s = LlmClusterSummarizer::new(chat.clone(), extractive());
    let out = s.attribute_entities(&attribute_request()).await.unwrap();
    // The prompt: one user message carrying the meta attributes and every member as (name, description),
    // <SEP> parts flattened; temperature 0, free text.
    let requests = chat.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.messages.len(), 1);
    assert_eq!(r.messages[0].role, Role::User);
    assert_eq!(r.settings.temperature, Some(0.0));
    assert_eq!(r.settings.response_format, ResponseFormat::Text);
    let prompt = &r.messages[0].content;
    assert_eq!(prompt, &attribute_prompt(&attribute_request()));
    assert!(prompt
        .contains("Meta attributes: [location, organization]\nEntities: (RIVER ODRA, The Odra"));
    assert!(prompt.contains(
        "(RIVER NEMAN, The Neman drains into the Curonian Lagoon of the Baltic Sea. The Neman"
    ));
    assert!(!prompt.contains("<SEP>"));
    // The parse: one entity, three relations (the reversed duplicate pair dropped, a non-numeric strength
    // becomes 1), the malformed record skipped and counted.
    assert_eq!(out.outcome, Outcome::Llm);
    assert_eq!(out.entities.len(), 1);
    assert_eq!(out.entities[0].name, "BALTIC SEA BASIN");
    assert_eq!(out.entities[0].entity_type, "LOCATION");
    let rels: Vec<(&str, f64)> = out
        .relations
        .iter()
        .map(|r| (r.source.as_str(), r.strength))
        .collect();
    assert_eq!(
        rels,
        vec![
            ("RIVER ODRA", 9.0),
            ("RIVER VISTULA", 9.0),
            ("RIVER NEMAN", 1.0)
        ]
    );
    assert_eq!(out.skipped_records, 1);
    assert_eq!(s.stats().skipped_records, 1);
    assert_eq!(s.stats().calls, 1);
}

#[tokio::test]
async fn broken_reply_is_retried_with_a_corrective_turn_then_falls_back() {
    // First reply has no entity record → corrective retry (the broken reply and the reason are in the
    // conversation, so a response cache cannot return it again) → good reply.
    let chat = Arc::new(ScriptedChatModel::new([
        "Sure! The rivers all flow to the sea.",
        GOOD_ATTRIBUTES,
    ]));
    let s = LlmClusterSummarizer::new(chat.clone(), extractive());
    let out = s.attribute_entities(&attribute_request()).await.unwrap();
    assert_eq!(out.outcome, Outcome::Retried);
    assert_eq!(out.entities[0].name, "BALTIC SEA BASIN");
    let second = &chat.requests()[1];
    assert_eq!(second.messages.len(), 3);
    assert_eq!(second.messages[1].role, Role::Assistant);
    assert_eq!(
        second.messages[1].content,
        "Sure! The rivers all flow to the sea."
    );
    assert!(second.messages[2].content.contains("could not be used"));

    // Two broken replies → the extractive summary, counted.
    let chat = Arc::new(ScriptedChatModel::new(["no records", "still none"]));
    let s = LlmClusterSummarizer::new(chat.clone(), extractive());
    let out = s.attribute_entities(&attribute_request()).await.unwrap();
    assert_eq!(out.outcome, Outcome::Fallback);
    assert_eq!(
        out.entities[0].name,
        "GROUP: RIVER VISTULA / RIVER NEMAN / RIVER ODRA"
    );
    assert_eq!(out.relations.len(), 4);
    let st = s.stats();
    assert_eq!(
        (st.calls, st.retries, st.fallbacks, st.unusable_replies),
        (2, 1, 1, 2)
    );

    // A failing call is retried as is; two failures fall back.
    let chat = Arc::new(ScriptedChatModel::new(Vec::<String>::new()));
    chat.push_error("connection refused");
    chat.push_reply(GOOD_ATTRIBUTES);
    let s = LlmClusterSummarizer::new(chat.clone(), extractive());
    assert_eq!(
        s.attribute_entities(&attribute_request())
            .await
            .unwrap()
            .outcome,
        Outcome::Retried
    );
    assert_eq!(chat.requests()[0], chat.requests()[1]);
    assert_eq!(s.stats().call_errors, 1);
}

fn aggregate_request() -> AggregateRequest {
    AggregateRequest {
        layer: 0,
        members: members(),
        relations: vec![
            RelationRow {
                source: "RIVER ODRA".into(),
                target: "RIVER VISTULA".into(),
                description: "Both are Polish rivers.".into(),
                rank: 7,
            },
            RelationRow {
                source: "RIVER NEMAN".into(),
                target: "RIVER DAUGAVA".into(),
                description: "Neighbouring basins.".into(),
                rank: 3,
            },
        ],
        prompt_tokens: None,
    }
}

#[tokio::test]
async fn leanrag_aggregate_prompt_parse_and_validation() {
    let tables = aggregate_tables(&aggregate_request());
    // Entities by degree (desc), ties by name; relations by rank; the specs' CSV cells.
    let expected_start = "-----Entities-----\n```csv\n\"id\",\t\"entity\",\t\"type\",\t\"description\",\t\"degree\"\n\
0,\t\"RIVER VISTULA\",\t\"LOCATION\",\t\"The Vistula is the longest river of Poland. It reaches the Baltic Sea at Gdańsk.\",\t5\n\
1,\t\"RIVER NEMAN\",";
    assert!(tables.starts_with(expected_start), "{tables}");
    assert!(tables.contains(
        "-----Relationships-----\n```csv\n\"id\",\t\"source\",\t\"target\",\t\"description\",\t\"rank\"\n\
0,\t\"RIVER ODRA\",\t\"RIVER VISTULA\",\t\"Both are Polish rivers.\",\t7\n1,"
    ));

    let fenced = "```json\n{\"entity_name\": \"Baltic rivers\", \"entity_description\": \"Rivers that end in \
the Baltic Sea.\", \"findings\": [{\"summary\": \"All drain north\", \"explanation\": \"Each flows to the \
Baltic.\"}, {\"summary\": \"\", \"explanation\": \"\"}]}\n```";
    // First reply reuses a member name → rejected, retried; the fenced JSON is accepted.
    let chat = Arc::new(ScriptedChatModel::new([
        "{\"entity_name\": \"river vistula\", \"entity_description\": \"x\", \"findings\": []}",
        fenced,
    ]));
    let s = LlmClusterSummarizer::new(chat.clone(), extractive());
    let out = s.aggregate(&aggregate_request()).await.unwrap();
    assert_eq!(out.outcome, Outcome::Retried);
    assert_eq!(out.name, "Baltic rivers");
    assert_eq!(
        out.findings,
        vec![Finding {
            summary: "All drain north".into(),
            explanation: "Each flows to the Baltic.".into()
        }]
    );
    let first = &chat.requests()[0];
    assert_eq!(first.settings.response_format, ResponseFormat::JsonObject);
    assert_eq!(first.messages[0].role, Role::System);
    assert!(first.messages[0]
        .content
        .contains("entity aggregation analyst"));
    assert!(first.messages[1].content.starts_with(&tables));
    assert!(chat.requests()[1].messages[3]
        .content
        .contains("repeats a member's name"));

    // Python-literal style replies parse too; empty descriptions do not.
    let chat = Arc::new(ScriptedChatModel::new([
        "Here: {'entity_name': 'Baltic rivers', 'entity_description': '', 'findings': []}",
        "{'entity_name': 'Baltic rivers', 'entity_description': 'They end in the Baltic.', 'findings': [],}",
    ]));
    let s = LlmClusterSummarizer::new(chat, extractive());
    let out = s.aggregate(&aggregate_request()).await.unwrap();
    assert_eq!(
        (out.outcome, out.description.as_str()),
        (Outcome::Retried, "They end in the Baltic.")
    );

    // Broken twice → extractive aggregate: group name, top-5 findings by degree.
    let chat = Arc::new(ScriptedChatModel::new(["{not json", "nothing"]));
    let s = LlmClusterSummarizer::new(chat, extractive());
    let out = s.aggregate(&aggregate_request()).await.unwrap();
    assert_eq!(out.outcome, Outcome::Fallback);
    assert_eq!(out.findings.len(), 4);
    assert_eq!(out.findings[0].summary, "RIVER VISTULA");
    assert_eq!(
        out.findings[0].explanation,
        "The Vistula is the longest river of Poland."
    );
}

#[tokio::test]
async fn leanrag_relation_sentence() {
    let request = RelateRequest {
        layer: 1,
        a: (
            "Baltic rivers".into(),
            vec![Finding {
                summary: "North".into(),
                explanation: "They flow north.".into(),
            }],
        ),
        b: ("Baltic ports".into(), vec![]),
        lines: "relationship<|>RIVER ODRA<|>SZCZECIN<|>Szczecin lies on the Odra.".into(),
        descriptions: vec!["Szczecin lies on the Odra.".into()],
        word_limit: 80,
    };
    let chat = Arc::new(ScriptedChatModel::new([
        "relationship<|>RIVER ODRA<|>SZCZECIN<|>copied",
        "\n  The ports sit at the mouths of the rivers.  \nExtra line.",
    ]));
    let s = LlmClusterSummarizer::new(chat.clone(), extractive());
    let out = s.relate(&request).await.unwrap();
    assert_eq!(out.text, "The ports sit at the mouths of the rivers.");
    assert_eq!(out.outcome, Outcome::Retried);
    let prompt = &chat.requests()[0].messages[1].content;
    assert!(prompt.contains("Group A: Baltic rivers\nNorth: They flow north."));
    assert!(prompt.contains("Group B: Baltic ports\n(no findings)"));
    assert!(prompt.contains("at most 80 words"));
    // Offline: the extractive summary of the relation descriptions within the word limit.
    let out = extractive()
        .relate(&RelateRequest {
            word_limit: 3,
            ..request
        })
        .await
        .unwrap();
    assert_eq!(
        (out.text.as_str(), out.outcome),
        ("Szczecin lies on", Outcome::Extractive)
    );
}

#[tokio::test]
async fn extractive_summaries_of_a_small_cluster() {
    let s = extractive();
    let out = s.attribute_entities(&attribute_request()).await.unwrap();
    assert_eq!(
        group_name(&members()),
        "GROUP: RIVER VISTULA / RIVER NEMAN / RIVER ODRA"
    );
    assert_eq!(out.entities.len(), 1);
    let e = &out.entities[0];
    assert_eq!(
        (e.name.as_str(), e.entity_type.as_str()),
        ("GROUP: RIVER VISTULA / RIVER NEMAN / RIVER ODRA", "CLUSTER")
    );
    // The description is made of the members' own sentences, in their original order, within 100 tokens.
    let all = "The Odra flows north into the Baltic Sea. It forms part of the border. The Vistula is the longest \
river of Poland. It reaches the Baltic Sea at Gdańsk. The Neman drains into the Curonian Lagoon of the Baltic \
Sea. The Neman crosses Belarus and Lithuania. The Daugava ends in the Gulf of Riga.";
    assert!(Encoding::O200kBase.count(&e.description).unwrap() <= 100);
    assert_eq!(e.description, all, "all seven sentences fit in 100 tokens");
    // One member → summary relation each, weight 1, the member's first sentence.
    assert_eq!(out.relations.len(), 4);
    assert_eq!(out.relations[2].source, "RIVER NEMAN");
    assert_eq!(
        out.relations[2].description,
        "The Neman drains into the Curonian Lagoon of the Baltic Sea."
    );
    assert!(out
        .relations
        .iter()
        .all(|r| r.strength == 1.0 && r.target == e.name));
    // A tighter budget keeps the most central sentences only.
    let mut long = members();
    for m in &mut long {
        m.description = format!(
            "{} {}",
            m.description,
            "Unrelated filler about medieval trade fairs. ".repeat(3)
        );
    }
    let out = s
        .aggregate(&AggregateRequest {
            layer: 0,
            members: long,
            relations: vec![],
            prompt_tokens: None,
        })
        .await
        .unwrap();
    assert!(Encoding::Cl100kBase.count(&out.description).unwrap() <= 100);
    assert_eq!(out.outcome, Outcome::Extractive);
}

#[test]
fn aggregate_prompt_budget_is_configurable() {
    // Half of the budget per table; a table keeps at least its first row.
    let tiny = AggregateRequest {
        prompt_tokens: Some(2),
        ..aggregate_request()
    };
    let tables = aggregate_tables(&tiny);
    assert_eq!(tables.matches("\n0,\t").count(), 2, "{tables}");
    assert!(!tables.contains("\n1,\t"), "{tables}");
    let full = aggregate_tables(&aggregate_request());
    assert!(full.contains("\n1,\t"));
    assert_eq!(
        full,
        aggregate_tables(&AggregateRequest {
            prompt_tokens: Some(12_000),
            ..aggregate_request()
        })
    );
}
