//! Community reports with a scripted chat model: order, budget handling, retry and fallback, reuse.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;

use kgrag_community::report::{
    generate_reports, generate_reports_by_level, generate_reports_on_demand, pack_context,
    CommunityInput, Outcome, Report, ReportEntity, ReportRelation,
};
use kgrag_text::{Encoding, ExtractiveSummarizer};
use kgrag_types::testing::{HashingEmbedder, ScriptedChatModel};
use kgrag_types::ChatRequest;

fn entity(name: &str, degree: usize, words: usize) -> ReportEntity<'static> {
    ReportEntity {
        name: name.to_owned().into(),
        entity_type: "THING".into(),
        description: format!("{name} is a thing. {}", "word ".repeat(words))
            .trim()
            .to_owned()
            .into(),
        degree,
    }
}

/// Community 0 (level 0) = {A, B, C, D} with sub-communities 1 = {A, B} and 2 = {C, D} (level 1).
fn communities(words: usize) -> Vec<CommunityInput<'static>> {
    let rel = |a: &str, b: &str| ReportRelation {
        source: a.to_owned().into(),
        target: b.to_owned().into(),
        description: format!("{a} works with {b}.").into(),
        rank: 2,
    };
    vec![
        CommunityInput {
            id: 0,
            level: 0,
            entities: vec![
                entity("A", 3, words),
                entity("B", 2, words),
                entity("C", 2, words),
                entity("D", 1, words),
            ],
            relations: vec![rel("A", "B"), rel("C", "D"), rel("B", "C")],
            sub_communities: vec![1, 2],
            occurrence: 1.0,
        },
        CommunityInput {
            id: 1,
            level: 1,
            entities: vec![entity("A", 3, words), entity("B", 2, words)],
            relations: vec![rel("A", "B")],
            sub_communities: vec![],
            occurrence: 0.5,
        },
        CommunityInput {
            id: 2,
            level: 1,
            entities: vec![entity("C", 2, words), entity("D", 1, words)],
            relations: vec![rel("C", "D")],
            sub_communities: vec![],
            occurrence: 0.25,
        },
    ]
}

fn responder() -> ScriptedChatModel {
    ScriptedChatModel::with_responder(|req: &ChatRequest| {
        let user = &req.messages[1].content;
        let first = user
            .lines()
            .find(|l| l.starts_with("0,\t"))
            .unwrap_or("?")
            .to_owned();
        Ok(format!(
            "{{\"title\": \"T {}\", \"summary\": \"S\", \"rating\": 7.5, \"rating_explanation\": \"R\", \
             \"findings\": [{{\"summary\": \"F\", \"explanation\": \"E\"}}]}}",
            first.len()
        ))
    })
}

fn text() -> ExtractiveSummarizer {
    ExtractiveSummarizer::new(Arc::new(HashingEmbedder::new(32)), Encoding::O200kBase)
}

#[tokio::test]
async fn deepest_level_first_and_reuse_of_unchanged_communities() {
    let chat = responder();
    let reports = generate_reports(
        &communities(3),
        Some(&chat),
        &text(),
        &HashMap::new(),
        32768,
        1,
    )
    .await
    .unwrap();
    assert_eq!(reports.len(), 3);
    // Level 1 (ids 1, 2) before level 0.
    let order: Vec<bool> = chat
        .requests()
        .iter()
        .map(|r| r.messages[1].content.contains("\"D\"") && r.messages[1].content.contains("\"A\""))
        .collect();
    assert_eq!(order, vec![false, false, true]);
    assert!(reports
        .values()
        .all(|r| r.outcome == Outcome::Llm && r.rating == 7.5));
    assert!(reports[&0].render().starts_with("# T "));
    // A rebuild with the same inputs sends nothing to the model.
    let previous: HashMap<String, Report> = reports
        .values()
        .map(|r| (r.input_hash.clone(), r.clone()))
        .collect();
    let chat2 = responder();
    let again = generate_reports(&communities(3), Some(&chat2), &text(), &previous, 32768, 2)
        .await
        .unwrap();
    assert_eq!(chat2.calls(), 0);
    assert!(again
        .values()
        .all(|r| r.reused && r.outcome == Outcome::Llm));
    // A changed sub-community changes its hash and its parent's (the parent's context holds no sub-report
    // while the raw tables fit, but its members' descriptions changed too).
    let mut changed = communities(3);
    changed[2].entities[0]
        .description
        .to_mut()
        .push_str(" It changed.");
    changed[0].entities[2]
        .description
        .to_mut()
        .push_str(" It changed.");
    let chat3 = responder();
    let third = generate_reports(&changed, Some(&chat3), &text(), &previous, 32768, 1)
        .await
        .unwrap();
    assert_eq!(chat3.calls(), 2);
    assert!(third[&1].reused);
    assert!(!third[&2].reused && !third[&0].reused);
}

#[tokio::test]
async fn sub_reports_replace_raw_tables_that_do_not_fit() {
    let cs = communities(200);
    let by_id: HashMap<usize, &CommunityInput> = cs.iter().map(|c| (c.id, c)).collect();
    let mut reports = HashMap::new();
    for id in [1, 2] {
        reports.insert(
            id,
            Report {
                title: format!("Sub {id}"),
                summary: "S".into(),
                ..Report::default()
            },
        );
    }
    // Budget 600: the four ~205-token descriptions do not fit in 300 → sub-reports first, by occurrence.
    let ctx = pack_context(&cs[0], &by_id, &reports, 600);
    assert!(ctx.starts_with("-----Reports-----"), "{ctx}");
    let sub1 = ctx.find("Sub 1").unwrap();
    let sub2 = ctx.find("Sub 2").unwrap();
    assert!(sub1 < sub2, "higher occurrence first");
    // Every member is covered by the included sub-communities, so the refill lists them after any
    // uncovered ones (here: none uncovered), within what the reports left of the budget.
    let reports_end = ctx.find("-----Entities-----").unwrap();
    assert!(reports_end > sub2);
    // With a large budget the raw tables are used.
    let ctx = pack_context(&cs[0], &by_id, &reports, 32768);
    assert!(ctx.starts_with("-----Entities-----"));
    assert!(!ctx.contains("-----Reports-----"));
}

#[tokio::test]
async fn broken_json_is_retried_then_falls_back_to_the_extractive_report() {
    let chat = ScriptedChatModel::new(["{not json", "{\"title\": \"\", \"summary\": \"\"}"]);
    let cs = communities(3);
    let one = vec![CommunityInput {
        sub_communities: vec![],
        ..cs[1].clone()
    }];
    let reports = generate_reports(&one, Some(&chat), &text(), &HashMap::new(), 32768, 1)
        .await
        .unwrap();
    let r = &reports[&1];
    assert_eq!(r.outcome, Outcome::Fallback);
    assert!(r
        .failure
        .as_deref()
        .is_some_and(|f| f.starts_with("unusable reply")));
    assert_eq!(r.title, "Community 1: A, B");
    assert_eq!(r.rating, 0.0);
    assert_eq!(r.findings[0].summary, "A");
    assert_eq!(r.findings[0].explanation, "A is a thing.");
    let second = &chat.requests()[1];
    assert_eq!(
        second.messages.len(),
        4,
        "the broken reply and the reason go back to the model"
    );
    // A fenced reply with a string rating parses on the retry.
    let chat = ScriptedChatModel::new([
        "no json here".to_string(),
        "```json\n{\"title\": \"T\", \"summary\": \"S\", \"rating\": \"4\", \"findings\": []}\n```"
            .to_string(),
    ]);
    let reports = generate_reports(&one, Some(&chat), &text(), &HashMap::new(), 32768, 1)
        .await
        .unwrap();
    assert_eq!(
        (reports[&1].outcome, reports[&1].rating),
        (Outcome::Retried, 4.0)
    );
    // Offline: the extractive report.
    let offline = generate_reports(&one, None, &text(), &HashMap::new(), 32768, 1)
        .await
        .unwrap();
    assert_eq!(offline[&1].outcome, Outcome::Extractive);
    assert!(!offline[&1].summary.is_empty());
    // An offline report is reused offline, but rewritten once a model is available.
    let previous: HashMap<String, Report> = offline
        .values()
        .map(|r| (r.input_hash.clone(), r.clone()))
        .collect();
    let again = generate_reports(&one, None, &text(), &previous, 32768, 1)
        .await
        .unwrap();
    assert!(again[&1].reused);
    let chat = responder();
    let upgraded = generate_reports(&one, Some(&chat), &text(), &previous, 32768, 1)
        .await
        .unwrap();
    assert_eq!(
        (upgraded[&1].outcome, upgraded[&1].reused, chat.calls()),
        (Outcome::Llm, false, 1)
    );
    // Duplicate ids are rejected.
    let twice = vec![one[0].clone(), one[0].clone()];
    assert!(
        generate_reports(&twice, None, &text(), &HashMap::new(), 32768, 1)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn levels_made_on_demand_give_the_same_reports() {
    // A budget the raw tables of community 0 overflow (its context then takes its sub-communities'
    // reports, which must still be at hand when its level is made) and one they fit in.
    for (words, budget) in [(3, 32768), (60, 200)] {
        let all = communities(words);
        let chat = responder();
        let expected = generate_reports(&all, Some(&chat), &text(), &HashMap::new(), budget, 2)
            .await
            .unwrap();
        let mut asked = Vec::new();
        let chat = responder();
        let got = generate_reports_by_level(
            &[0, 1, 1],
            |level| {
                asked.push(level);
                communities(words)
                    .into_iter()
                    .filter(|c| c.level == level)
                    .collect()
            },
            Some(&chat),
            &text(),
            &HashMap::new(),
            budget,
            2,
        )
        .await
        .unwrap();
        assert_eq!(asked, [1, 0], "each level made once, deepest first");
        assert_eq!(got, expected, "words {words}, budget {budget}");
        // Each community made when its report is due (and its sub-communities again when the parent's
        // raw tables overflow): the same reports, the same contexts.
        let made = std::sync::Mutex::new(Vec::new());
        let chat = responder();
        let one_by_one = generate_reports_on_demand(
            &[(0, 0), (1, 1), (2, 1)],
            |id| {
                made.lock().unwrap().push(id);
                communities(words).into_iter().find(|c| c.id == id)
            },
            Some(&chat),
            &text(),
            &HashMap::new(),
            budget,
            2,
        )
        .await
        .unwrap();
        assert_eq!(one_by_one, expected, "words {words}, budget {budget}");
        let made = made.into_inner().unwrap();
        assert_eq!(&made[..2], [1, 2], "the deeper level first: {made:?}");
        assert_eq!(made[2], 0, "{made:?}");
        let subs_again = if budget < 1000 { vec![1, 2] } else { vec![] };
        assert_eq!(
            made[3..],
            subs_again,
            "sub-communities made again only for an overflow"
        );
    }
    // A community the maker does not know, an input of another id, or an id listed twice: errors.
    // (communities as (id, level), the one community the maker always gives if any, the error)
    type Case = (Vec<(usize, usize)>, Option<usize>, &'static str);
    let cases: [Case; 3] = [
        (vec![(0, 0), (7, 1)], None, "community 7 has no input"),
        (vec![(0, 0)], Some(1), "is community 1 of level 1"),
        (vec![(1, 1), (1, 1)], None, "appears twice"),
    ];
    for (ids, always, error) in cases {
        let got = generate_reports_on_demand(
            &ids,
            |id| {
                let want = always.unwrap_or(id);
                communities(3).into_iter().find(|c| c.id == want)
            },
            None,
            &text(),
            &HashMap::new(),
            32768,
            1,
        )
        .await;
        let message = got.unwrap_err().to_string();
        assert!(message.contains(error), "{message}");
    }
    let with_subs = pack_context(
        &communities(60)[0],
        &communities(60).iter().map(|c| (c.id, c)).collect(),
        &generate_reports(&communities(60), None, &text(), &HashMap::new(), 200, 1)
            .await
            .unwrap()
            .into_iter()
            .collect(),
        200,
    );
    assert!(
        with_subs.contains("-----Reports-----"),
        "the small budget takes the sub-reports: {with_subs}"
    );
    // Through the slice API a sub-community may sit deeper than one level: its report still stands in
    // (the slice's every level is kept), and an id given twice fails before any report is asked.
    let mut deep = communities(60);
    deep[1].level = 2;
    deep[2].level = 2;
    let chat = responder();
    generate_reports(&deep, Some(&chat), &text(), &HashMap::new(), 200, 1)
        .await
        .unwrap();
    let asked = chat.requests();
    let top = &asked.last().unwrap().messages[1].content;
    assert!(top.contains("-----Reports-----"), "{top}");
    let chat = responder();
    let twice = vec![deep[1].clone(), deep[2].clone(), deep[1].clone()];
    assert!(
        generate_reports(&twice, Some(&chat), &text(), &HashMap::new(), 200, 1)
            .await
            .is_err()
    );
    assert_eq!(chat.calls(), 0, "duplicates are found before any call");
    // A community given at another level than its own is an error, as is an id given twice.
    let wrong = generate_reports_by_level(
        &[0, 1],
        |_| communities(3).into_iter().filter(|c| c.id == 1).collect(),
        None,
        &text(),
        &HashMap::new(),
        32768,
        1,
    )
    .await;
    assert!(wrong.is_err());
    let twice = generate_reports_by_level(
        &[1],
        |_| {
            let one = communities(3).remove(1);
            vec![one.clone(), one]
        },
        None,
        &text(),
        &HashMap::new(),
        32768,
        1,
    )
    .await;
    assert!(twice.is_err());
}
