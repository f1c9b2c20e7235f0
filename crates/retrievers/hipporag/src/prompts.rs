//! Prompt texts of HippoRAG 2's recognition-memory filter and QA reader: our own wording and demonstrations.
//!
//! The filter (spec `hipporag2.md` §5.3) sees [`FILTER_SYSTEM`], ten demonstration pairs built
//! from [`FILTER_DEMOS`], then the real question with its candidate facts. The reader (§6) sees
//! [`QA_SYSTEM`], the one-shot pair [`QA_SHOT_USER`] / [`QA_SHOT_ASSISTANT`], then the retrieved
//! passages and the question.

/// One demonstration of the recognition-memory filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterDemo {
    /// A multi-hop question.
    pub question: &'static str,
    /// Candidate facts (normalised: lowercase, letters/digits/spaces only), as the retriever shows them.
    pub candidates: &'static [[&'static str; 3]],
    /// The facts to keep, a subset of `candidates` in order of usefulness (may be empty).
    pub kept: &'static [[&'static str; 3]],
}

/// System text of the filter: names the fields `question`, `fact_before_filter` and
/// `fact_after_filter`, explains the `[[ ## name ## ]]` section markers and the closing
/// `[[ ## completed ## ]]` line, and asks for at most four relevant facts copied from the
/// candidates (`{"fact": []}` when none is relevant).
pub const FILTER_SYSTEM: &str = "You are the fact filter of a retrieval system that walks a \
knowledge graph.\n\n\
Fields you read:\n\
- `question`: a question that takes several reasoning steps to answer.\n\
- `fact_before_filter`: candidate facts the retriever found in the knowledge graph, as a JSON \
object {\"fact\": [[subject, predicate, object], ...]}.\n\n\
Field you write:\n\
- `fact_after_filter`: the candidate facts you keep, as a JSON object of the same form \
{\"fact\": [[subject, predicate, object], ...]}.\n\n\
Every turn is made of sections. A section opens with a marker line of the form [[ ## name ## \
]], where name is one of the fields above, and the field's content follows on the lines after \
it. A request looks like this:\n\n\
[[ ## question ## ]]\n\
<the question>\n\n\
[[ ## fact_before_filter ## ]]\n\
<the candidate facts>\n\n\
Your reply looks like this, and its last line is always the marker [[ ## completed ## ]]:\n\n\
[[ ## fact_after_filter ## ]]\n\
<the facts you keep>\n\n\
[[ ## completed ## ]]\n\n\
Your task: read the multi-hop question and the candidate facts, and select up to 4 facts that \
help to answer it, the most useful first. Choose only from the candidates and copy each chosen \
fact exactly as it is written there. Never invent a fact, never edit, merge or complete one, \
and do not add links you know from elsewhere. If none of the candidates is relevant, reply with \
{\"fact\": []}.";

/// The ten demonstrations: five candidates each; one keeps nothing, the others keep one to four
/// facts.
pub const FILTER_DEMOS: [FilterDemo; 10] = [
    FilterDemo {
        question:
            "Which river flows through the city where the director of The Copper Orchard was born?",
        candidates: &[
            ["the copper orchard", "directed by", "halvard lind"],
            ["halvard lind", "born in", "vienna"],
            ["the copper orchard", "released in", "1987"],
            ["halvard lind", "studied at", "the vienna film academy"],
            ["the copper orchard", "filmed in", "salzburg"],
        ],
        kept: &[
            ["the copper orchard", "directed by", "halvard lind"],
            ["halvard lind", "born in", "vienna"],
        ],
    },
    FilterDemo {
        question:
            "In which country was the founder of the company that makes the Norvik 7 camera born?",
        candidates: &[
            ["norvik 7", "is manufactured by", "keller optics"],
            ["keller optics", "was founded by", "anton keller"],
            ["keller optics", "is headquartered in", "munich"],
            ["anton keller", "was born in", "switzerland"],
            ["norvik 7", "was released in", "2011"],
        ],
        kept: &[
            ["norvik 7", "is manufactured by", "keller optics"],
            ["keller optics", "was founded by", "anton keller"],
            ["anton keller", "was born in", "switzerland"],
        ],
    },
    FilterDemo {
        question: "What is the nationality of the composer of the opera The Glass Harbour?",
        candidates: &[
            ["harbour bridge", "opened in", "1932"],
            ["glass menagerie", "written by", "tennessee williams"],
            ["sydney opera house", "was designed by", "jorn utzon"],
            ["opera", "is a form of", "theatre"],
            ["harbour master", "is responsible for", "port safety"],
        ],
        kept: &[],
    },
    FilterDemo {
        question: "When was the university attended by the poet Marta Ilves founded?",
        candidates: &[
            ["marta ilves", "won", "the baltic poetry prize"],
            ["marta ilves", "attended", "university of tartu"],
            ["marta ilves", "was born in", "1964"],
            ["university of tallinn", "has", "eight faculties"],
            ["baltic poetry prize", "was established in", "1991"],
        ],
        kept: &[["marta ilves", "attended", "university of tartu"]],
    },
    FilterDemo {
        question:
            "Are the directors of Night Ferry to Oran and The Salt Road from the same country?",
        candidates: &[
            ["night ferry to oran", "directed by", "luc amrani"],
            ["the salt road", "directed by", "ines carvalho"],
            ["night ferry to oran", "stars", "paul mercier"],
            ["ines carvalho", "is", "portuguese film director"],
            ["luc amrani", "is", "french film director"],
        ],
        kept: &[
            ["night ferry to oran", "directed by", "luc amrani"],
            ["luc amrani", "is", "french film director"],
            ["the salt road", "directed by", "ines carvalho"],
            ["ines carvalho", "is", "portuguese film director"],
        ],
    },
    FilterDemo {
        question:
            "Which film came out first, Winter in Lisbon Harbour or The Last Lighthouse Keeper?",
        candidates: &[
            ["the last lighthouse keeper", "was released in", "1994"],
            ["winter in lisbon harbour", "was released in", "1989"],
            ["the last lighthouse keeper", "was directed by", "ewa nowak"],
            ["lisbon", "is the capital of", "portugal"],
            ["winter in lisbon harbour", "won", "a silver bear"],
        ],
        kept: &[
            ["winter in lisbon harbour", "was released in", "1989"],
            ["the last lighthouse keeper", "was released in", "1994"],
        ],
    },
    FilterDemo {
        question: "Who is the spouse of the lead singer of the band Paper Comets?",
        candidates: &[
            ["paper comets", "formed in", "manchester"],
            ["paper comets", "lead singer", "dana whitlow"],
            ["paper comets", "released", "static summer"],
            ["dana whitlow", "plays", "rhythm guitar"],
            ["manchester", "is in", "england"],
        ],
        kept: &[["paper comets", "lead singer", "dana whitlow"]],
    },
    FilterDemo {
        question:
            "What language is spoken in the country where the author of The Iron Lantern was born?",
        candidates: &[
            ["the iron lantern", "was written by", "tomas brenner"],
            ["tomas brenner", "was born in", "graz"],
            ["the iron lantern", "was published in", "1952"],
            ["graz", "is a city in", "austria"],
            ["tomas brenner", "moved to", "paris"],
        ],
        kept: &[
            ["the iron lantern", "was written by", "tomas brenner"],
            ["tomas brenner", "was born in", "graz"],
            ["graz", "is a city in", "austria"],
        ],
    },
    FilterDemo {
        question: "Were the founders of Halden Motors and Brightline Rail born in the same city?",
        candidates: &[
            ["halden motors", "was founded by", "erik halden"],
            ["brightline rail", "was founded by", "george pratt"],
            ["halden motors", "produces", "electric trucks"],
            ["erik halden", "was born in", "gothenburg"],
            ["george pratt", "was born in", "leeds"],
        ],
        kept: &[
            ["halden motors", "was founded by", "erik halden"],
            ["erik halden", "was born in", "gothenburg"],
            ["brightline rail", "was founded by", "george pratt"],
            ["george pratt", "was born in", "leeds"],
        ],
    },
    FilterDemo {
        question:
            "In which city did the founder of the record label that signed The Velvet Harbours die?",
        candidates: &[
            ["northgate records", "was founded by", "samuel okafor"],
            ["the velvet harbours", "signed with", "northgate records"],
            ["northgate records", "is based in", "bristol"],
            ["samuel okafor", "worked as", "a radio host"],
            ["the velvet harbours", "toured", "japan"],
        ],
        kept: &[
            ["the velvet harbours", "signed with", "northgate records"],
            ["northgate records", "was founded by", "samuel okafor"],
        ],
    },
];

/// System text of the QA reader.
pub const QA_SYSTEM: &str = "You are a careful reading-comprehension assistant. You are given a \
few passages, each introduced by its Wikipedia title, and a question about them. Read the \
passages closely, then reason step by step after \"Thought: \", linking the facts you need from \
one passage to the next. Finish with a line that starts with \"Answer: \" and gives a concise \
answer, a name, date, number or short phrase, without any elaboration.";

/// The one-shot user turn of the reader: five titled passages and a two-hop question.
pub const QA_SHOT_USER: &str = "Wikipedia Title: Marlow Pike\n\
Marlow Pike is a lake in the northern uplands of Estmere, fed by meltwater from three small \
glaciers. Anglers know it for its unusually large trout.\n\n\
Wikipedia Title: The Tin Orchard\n\
The Tin Orchard is a 1971 novel by Greta Solberg about a family of fruit growers living through \
a long drought. It won the Harrow Prize the following year.\n\n\
Wikipedia Title: Harrow Prize\n\
The Harrow Prize is an annual literary award founded in 1950. Each winner receives a silver \
quill and a modest grant.\n\n\
Wikipedia Title: Greta Solberg\n\
Greta Solberg (1928-1990) was a novelist and essayist. She spent most of her life in Vindholm, \
a port town on the western coast, where she also taught school.\n\n\
Wikipedia Title: Vindholm Lighthouse\n\
The Vindholm Lighthouse stands on a rocky point south of the town and has guided ships into the \
harbour since 1884.\n\n\
Question: In which town did the author of The Tin Orchard spend most of her life?\n\
Thought: ";

/// The one-shot assistant turn: two sentences of reasoning, then
/// `"\nAnswer: <short answer>."`.
pub const QA_SHOT_ASSISTANT: &str = "The Tin Orchard was written by Greta Solberg. Greta Solberg \
spent most of her life in Vindholm.\n\
Answer: Vindholm.";
