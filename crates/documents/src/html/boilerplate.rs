//! What of a page is boilerplate: elements that are never content, class and id names, the content root,
//! blocks that are mostly links.

use std::collections::HashMap;

use super::dom::{Dom, Node};

/// Elements that are never a page's content.
const NEVER: &[&str] = &[
    "nav", "aside", "footer", "form", "button", "select", "input", "label", "svg", "canvas",
    "video", "audio", "object", "embed", "map", "dialog", "menu", "head",
];

const BOILER_WORDS: &[&str] = &[
    "nav",
    "navbar",
    "navigation",
    "menu",
    "menubar",
    "breadcrumb",
    "breadcrumbs",
    "footer",
    "sidebar",
    "side",
    "widget",
    "widgets",
    "cookie",
    "cookies",
    "consent",
    "gdpr",
    "banner",
    "popup",
    "modal",
    "overlay",
    "newsletter",
    "subscribe",
    "subscription",
    "share",
    "sharing",
    "social",
    "related",
    "comments",
    "comment",
    "advert",
    "advertisement",
    "ads",
    "ad",
    "sponsor",
    "sponsored",
    "promo",
    "toolbar",
    "pagination",
    "pager",
    "masthead",
    "skip",
    "legal",
    "copyright",
    "topbar",
    "signup",
    "login",
    "print",
    "disclaimer",
    "tags",
    "byline",
    "author-bio",
];

const CONTENT_WORDS: &[&str] = &[
    "article", "content", "post", "entry", "story", "main", "body", "text",
];

/// The words of a class or id value (`site-footer__links` → `site`, `footer`, `links`).
fn words(value: &str) -> impl Iterator<Item = String> + '_ {
    value
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
}

pub(super) fn is_boilerplate(dom: &Dom, i: usize, top_level: bool) -> bool {
    let name = dom.name(i);
    if NEVER.contains(&name) {
        return true;
    }
    // A page's own header (not an article's).
    if name == "header" && top_level {
        return true;
    }
    if dom.attr(i, "hidden").is_some() || dom.attr(i, "aria-hidden") == Some("true") {
        return true;
    }
    if let Some(style) = dom.attr(i, "style") {
        let s: String = style
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        if s.contains("display:none") || s.contains("visibility:hidden") {
            return true;
        }
    }
    if let Some(role) = dom.attr(i, "role") {
        if matches!(
            role.to_ascii_lowercase().as_str(),
            "navigation"
                | "banner"
                | "contentinfo"
                | "complementary"
                | "search"
                | "menu"
                | "menubar"
                | "dialog"
                | "alertdialog"
                | "toolbar"
        ) {
            return true;
        }
    }
    let mut boiler = false;
    let mut content = false;
    for key in ["class", "id"] {
        if let Some(v) = dom.attr(i, key) {
            for w in words(v) {
                if BOILER_WORDS.contains(&w.as_str()) {
                    boiler = true;
                }
                if CONTENT_WORDS.contains(&w.as_str()) {
                    content = true;
                }
            }
        }
    }
    boiler && !content
}

/// The tree with boilerplate cut: a copy of the children lists where cut elements are gone.
pub(super) fn prune(dom: &Dom, root: usize, keep_headers: bool) -> HashMap<usize, Vec<usize>> {
    let mut kept: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut stack = vec![(root, 0usize, false)];
    while let Some((i, depth, in_article)) = stack.pop() {
        let name = dom.name(i);
        let article = in_article || matches!(name, "article" | "main");
        let children: Vec<usize> = dom
            .children(i)
            .iter()
            .copied()
            .filter(|&c| match dom.nodes.get(c) {
                Some(Node::Text(_)) => true,
                Some(Node::Element { .. }) => !is_boilerplate(dom, c, !article && !keep_headers),
                None => false,
            })
            .collect();
        for &c in &children {
            if matches!(dom.nodes.get(c), Some(Node::Element { .. })) && depth < 400 {
                stack.push((c, depth + 1, article));
            }
        }
        kept.insert(i, children);
    }
    kept
}

/// Text statistics of a pruned subtree: (all text, text inside links, links).
pub(super) fn text_stats(
    dom: &Dom,
    kept: &HashMap<usize, Vec<usize>>,
    i: usize,
) -> (usize, usize, usize) {
    let mut all = 0;
    let mut linked = 0;
    let mut links = 0;
    let mut stack = vec![(i, false)];
    while let Some((n, in_link)) = stack.pop() {
        match dom.nodes.get(n) {
            Some(Node::Text(t)) => {
                let len = t.split_whitespace().map(str::len).sum::<usize>();
                all += len;
                if in_link {
                    linked += len;
                }
            }
            Some(Node::Element { name, .. }) => {
                let link = name == "a";
                if link {
                    links += 1;
                }
                for &c in kept.get(&n).map_or(&[][..], Vec::as_slice) {
                    stack.push((c, in_link || link));
                }
            }
            None => {}
        }
    }
    (all, linked, links)
}

/// The content root under `body`: `<main>`, the `<article>` with the most text, else the best-scoring
/// container of paragraphs — unless it holds under 40 % of the page's text.
pub(super) fn content_root(dom: &Dom, kept: &HashMap<usize, Vec<usize>>, body: usize) -> usize {
    let nodes: Vec<usize> = reachable(kept, body);
    let total = text_stats(dom, kept, body).0.max(1);
    let mains: Vec<usize> = nodes
        .iter()
        .copied()
        .filter(|&n| dom.name(n) == "main" || dom.attr(n, "role") == Some("main"))
        .collect();
    if let Some(&m) = mains.first() {
        if text_stats(dom, kept, m).0 * 5 >= total {
            return m;
        }
    }
    let best_article = nodes
        .iter()
        .copied()
        .filter(|&n| dom.name(n) == "article")
        .max_by_key(|&n| text_stats(dom, kept, n).0);
    if let Some(a) = best_article {
        if text_stats(dom, kept, a).0 * 5 >= total * 2 {
            return a;
        }
    }
    // Readability's scoring of paragraph containers.
    let mut score: HashMap<usize, f64> = HashMap::new();
    let mut parent: HashMap<usize, usize> = HashMap::new();
    for &n in &nodes {
        for &c in kept.get(&n).map_or(&[][..], Vec::as_slice) {
            parent.insert(c, n);
        }
    }
    for &n in &nodes {
        if !matches!(dom.name(n), "p" | "pre" | "td" | "blockquote" | "li") {
            continue;
        }
        let (len, linked, _) = text_stats(dom, kept, n);
        if len < 25 {
            continue;
        }
        let s = 1.0 + (len as f64 / 100.0).min(3.0) + (len - linked) as f64 / len as f64;
        if let Some(&p) = parent.get(&n) {
            *score.entry(p).or_default() += s;
            if let Some(&g) = parent.get(&p) {
                *score.entry(g).or_default() += s / 2.0;
            }
        }
    }
    let best = score
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(n, _)| n);
    match best {
        Some(b) if text_stats(dom, kept, b).0 * 5 >= total * 2 => b,
        _ => body,
    }
}

pub(super) fn reachable(kept: &HashMap<usize, Vec<usize>>, root: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        out.push(n);
        if let Some(c) = kept.get(&n) {
            stack.extend(c.iter().rev());
        }
    }
    out
}
