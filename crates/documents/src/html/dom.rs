//! The page's tree: a small tolerant parser that closes what authors leave open as browsers do, and the
//! decoding of its bytes and character references.

use crate::builder::squash;
use crate::{Deadline, Result};

/// One element or text of the tree.
#[derive(Debug)]
pub(crate) enum Node {
    Element {
        name: String,
        attrs: Vec<(String, String)>,
        children: Vec<usize>,
    },
    Text(String),
}

/// An element's name, attributes and children.
pub(super) type ElementRef<'a> = (&'a str, &'a [(String, String)], &'a [usize]);

/// A parsed page: nodes in an arena, node 0 the document.
#[derive(Debug)]
pub(crate) struct Dom {
    pub(crate) nodes: Vec<Node>,
    pub(crate) title: Option<String>,
}

const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr", "keygen",
];

/// Elements whose content is raw text, skipped (their text is never content).
const RAW: &[&str] = &[
    "script", "style", "noscript", "template", "textarea", "xmp", "iframe", "noembed", "noframes",
];

/// Block elements: their start closes an open `<p>`.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "center",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "hr",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "ul",
    "li",
    "dd",
    "dt",
];

impl Dom {
    pub(super) fn element(&self, i: usize) -> Option<ElementRef<'_>> {
        match self.nodes.get(i)? {
            Node::Element {
                name,
                attrs,
                children,
            } => Some((name.as_str(), attrs.as_slice(), children.as_slice())),
            Node::Text(_) => None,
        }
    }

    pub(super) fn name(&self, i: usize) -> &str {
        self.element(i).map_or("", |(n, _, _)| n)
    }

    pub(super) fn attr(&self, i: usize, key: &str) -> Option<&str> {
        self.element(i)?
            .1
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn children(&self, i: usize) -> &[usize] {
        self.element(i).map_or(&[], |(_, _, c)| c)
    }

    /// Every element under `i` (itself included), depth first.
    pub(super) fn descendants(&self, i: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![i];
        while let Some(n) = stack.pop() {
            out.push(n);
            for &c in self.children(n).iter().rev() {
                stack.push(c);
            }
        }
        out
    }

    /// The first element named `name` under `i`.
    pub(crate) fn find(&self, i: usize, name: &str) -> Option<usize> {
        self.descendants(i)
            .into_iter()
            .find(|&n| self.name(n) == name)
    }
}

/// Decodes a page's bytes: a byte-order mark, else the charset its `<meta>` names, else UTF-8 when valid,
/// else Windows-1252.
pub(crate) fn decode(bytes: &[u8]) -> String {
    if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF".as_slice()) {
        return String::from_utf8_lossy(rest).into_owned();
    }
    if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
        let le = bytes[0] == 0xFF;
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|c| {
                if le {
                    u16::from_le_bytes([c[0], c[1]])
                } else {
                    u16::from_be_bytes([c[0], c[1]])
                }
            })
            .collect();
        return String::from_utf16_lossy(&units);
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(2048)]).to_ascii_lowercase();
    let declared_latin = [
        "charset=iso-8859-1",
        "charset=\"iso-8859-1",
        "charset=windows-1252",
        "charset=\"windows-1252",
        "charset=latin1",
    ]
    .iter()
    .any(|c| head.contains(c));
    match std::str::from_utf8(bytes) {
        Ok(s) if !declared_latin => s.to_owned(),
        _ => bytes
            .iter()
            .map(|&b| match b {
                0x80..=0x9F => cp1252(b),
                _ => char::from(b),
            })
            .collect(),
    }
}

fn cp1252(b: u8) -> char {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž',
        '\u{8f}', '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}',
        'ž', 'Ÿ',
    ];
    HIGH[usize::from(b - 0x80)]
}

/// Parses a page into a tree, closing what browsers close.
pub(crate) fn parse(text: &str, deadline: Deadline) -> Result<Dom> {
    let mut dom = Dom {
        nodes: vec![Node::Element {
            name: "#document".into(),
            attrs: Vec::new(),
            children: Vec::new(),
        }],
        title: None,
    };
    let mut stack: Vec<usize> = vec![0];
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut text_start = 0;
    let mut steps = 0u32;
    while i < bytes.len() {
        steps += 1;
        if steps.is_multiple_of(65_536) {
            deadline.check()?;
        }
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        // A tag, a comment, a declaration — or a lone '<' that is text.
        let next = bytes.get(i + 1).copied().unwrap_or(0);
        let is_tag = next.is_ascii_alphabetic() || next == b'/' || next == b'!' || next == b'?';
        if !is_tag {
            i += 1;
            continue;
        }
        push_text(&mut dom, &stack, &text[text_start..i]);
        if text[i..].starts_with("<!--") {
            i = text[i + 4..]
                .find("-->")
                .map_or(bytes.len(), |e| i + 4 + e + 3);
            text_start = i;
            continue;
        }
        if next == b'!' || next == b'?' {
            if text[i..].starts_with("<![CDATA[") {
                let end = text[i + 9..].find("]]>").map_or(bytes.len(), |e| i + 9 + e);
                push_text(&mut dom, &stack, &text[i + 9..end]);
                i = (end + 3).min(bytes.len());
            } else {
                i = text[i..].find('>').map_or(bytes.len(), |e| i + e + 1);
            }
            text_start = i;
            continue;
        }
        // The tag's text (without `<` and `>`); an unterminated tag runs to the end.
        let end = tag_end(bytes, i);
        let content_end = if bytes.get(end.wrapping_sub(1)) == Some(&b'>') && end > i + 1 {
            end - 1
        } else {
            end
        };
        let tag = text.get(i + 1..content_end).unwrap_or("");
        i = end;
        text_start = i;
        if let Some(closing) = tag.strip_prefix('/') {
            let name = closing
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            close(&dom, &mut stack, &name);
            continue;
        }
        let (name, attrs, self_closing) = parse_tag(tag);
        if name.is_empty() {
            continue;
        }
        if RAW.contains(&name.as_str()) || name == "title" {
            // Skip to its end tag; a title's text is the page's title.
            let close_tag = format!("</{name}");
            let lower_rest = &text[i..];
            let end_at = find_ci(lower_rest, &close_tag).map_or(bytes.len(), |e| i + e);
            if name == "title" && dom.title.is_none() {
                let t = squash(&entities(&text[i..end_at]));
                if !t.is_empty() {
                    dom.title = Some(t);
                }
            }
            i = text[end_at..]
                .find('>')
                .map_or(bytes.len(), |e| end_at + e + 1);
            text_start = i;
            continue;
        }
        implied_end(&dom, &mut stack, &name);
        let index = dom.nodes.len();
        dom.nodes.push(Node::Element {
            name: name.clone(),
            attrs,
            children: Vec::new(),
        });
        if let Some(&parent) = stack.last() {
            if let Some(Node::Element { children, .. }) = dom.nodes.get_mut(parent) {
                children.push(index);
            }
        }
        if !self_closing && !VOID.contains(&name.as_str()) {
            stack.push(index);
            if stack.len() > 512 {
                // Pathological nesting: stop nesting deeper.
                stack.pop();
            }
        }
    }
    push_text(&mut dom, &stack, &text[text_start.min(bytes.len())..]);
    Ok(dom)
}

/// The end of the tag starting at `start` (past its `>`), skipping quoted attribute values.
fn tag_end(bytes: &[u8], start: usize) -> usize {
    let mut quote = 0u8;
    let mut i = start + 1;
    while i < bytes.len() {
        let b = bytes[i];
        if quote != 0 {
            if b == quote {
                quote = 0;
            }
        } else if b == b'"' || b == b'\'' {
            // Quotes only open inside an attribute value (after `=`).
            if bytes[..i].iter().rev().find(|c| !c.is_ascii_whitespace()) == Some(&b'=') {
                quote = b;
            }
        } else if b == b'>' {
            return i + 1;
        }
        i += 1;
    }
    bytes.len()
}

fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    let n = needle.len();
    let hb = hay.as_bytes();
    let nb = needle.as_bytes();
    if hb.len() < n {
        return None;
    }
    (0..=hb.len() - n).find(|&k| hb[k..k + n].eq_ignore_ascii_case(nb))
}

/// A start tag's name (lower case), attributes and whether it closes itself.
fn parse_tag(tag: &str) -> (String, Vec<(String, String)>, bool) {
    let self_closing = tag.trim_end().ends_with('/');
    let tag = tag.trim_end().trim_end_matches('/');
    let name_end = tag
        .find(|c: char| c.is_whitespace() || c == '/')
        .unwrap_or(tag.len());
    let raw_name = &tag[..name_end];
    // `epub:type`-style prefixes stay on attributes; a prefixed element keeps its local name.
    let name = raw_name
        .rsplit(':')
        .next()
        .unwrap_or(raw_name)
        .to_ascii_lowercase();
    let mut attrs = Vec::new();
    let b = tag.as_bytes();
    let mut i = name_end;
    while i < b.len() && attrs.len() < 64 {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        let ks = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'/' {
            i += 1;
        }
        if ks == i {
            i += 1;
            continue;
        }
        let key = tag[ks..i].to_ascii_lowercase();
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let q = b[i];
                let vs = i + 1;
                let ve = b[vs..]
                    .iter()
                    .position(|&c| c == q)
                    .map_or(b.len(), |p| vs + p);
                value = entities(&tag[vs..ve]);
                i = (ve + 1).min(b.len());
            } else {
                let vs = i;
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                value = entities(&tag[vs..i]);
            }
        }
        attrs.push((key, value));
    }
    (name, attrs, self_closing)
}

fn push_text(dom: &mut Dom, stack: &[usize], raw: &str) {
    if raw.is_empty() {
        return;
    }
    let index = dom.nodes.len();
    dom.nodes.push(Node::Text(entities(raw)));
    if let Some(&parent) = stack.last() {
        if let Some(Node::Element { children, .. }) = dom.nodes.get_mut(parent) {
            children.push(index);
        }
    }
}

/// Closes elements an opening `name` implies closed (`<p>` before a block, `<li>` before an item, …).
fn implied_end(dom: &Dom, stack: &mut Vec<usize>, name: &str) {
    let top = |stack: &Vec<usize>| {
        stack
            .last()
            .map(|&i| dom.name(i).to_owned())
            .unwrap_or_default()
    };
    let in_scope = |stack: &Vec<usize>, target: &[&str], stops: &[&str]| {
        for &i in stack.iter().rev() {
            let n = dom.name(i);
            if target.contains(&n) {
                return true;
            }
            if stops.contains(&n) {
                return false;
            }
        }
        false
    };
    let pop_until = |stack: &mut Vec<usize>, target: &[&str]| {
        while let Some(&i) = stack.last() {
            if i == 0 {
                break;
            }
            let n = dom.name(i).to_owned();
            stack.pop();
            if target.contains(&n.as_str()) {
                break;
            }
        }
    };
    if BLOCKS.contains(&name)
        && in_scope(
            stack,
            &["p"],
            &[
                "div",
                "td",
                "th",
                "li",
                "table",
                "body",
                "article",
                "section",
                "main",
                "blockquote",
                "button",
            ],
        )
    {
        pop_until(stack, &["p"]);
    }
    match name {
        "li" if in_scope(stack, &["li"], &["ul", "ol", "menu", "table"]) => {
            pop_until(stack, &["li"])
        }
        "dt" | "dd" if in_scope(stack, &["dt", "dd"], &["dl", "table"]) => {
            pop_until(stack, &["dt", "dd"])
        }
        "tr" if in_scope(stack, &["tr"], &["table"]) => pop_until(stack, &["tr"]),
        "td" | "th" if in_scope(stack, &["td", "th"], &["tr", "table"]) => {
            pop_until(stack, &["td", "th"])
        }
        "tbody" | "thead" | "tfoot"
            if in_scope(stack, &["tbody", "thead", "tfoot"], &["table"]) =>
        {
            pop_until(stack, &["tbody", "thead", "tfoot"])
        }
        "option" if top(stack) == "option" => pop_until(stack, &["option"]),
        h if h.len() == 2 && h.starts_with('h') && h.as_bytes()[1].is_ascii_digit() => {
            let t = top(stack);
            if t.len() == 2 && t.starts_with('h') && t.as_bytes()[1].is_ascii_digit() {
                stack.pop();
            }
        }
        _ => {}
    }
}

/// Closes `name` if it is open (and what is open inside it); a stray end tag is ignored.
fn close(dom: &Dom, stack: &mut Vec<usize>, name: &str) {
    let local = name.rsplit(':').next().unwrap_or(name);
    if let Some(pos) = stack.iter().rposition(|&i| dom.name(i) == local) {
        if pos > 0 {
            stack.truncate(pos);
        }
    } else if local == "p" {
        // `</p>` with no `<p>` open is an empty paragraph: nothing to do.
    }
}

/// Replaces character references (`&amp;`, `&#233;`, `&#xE9;`, the named ones of HTML 4 and `&apos;`).
pub(crate) fn entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        let end = tail
            .char_indices()
            .take(32)
            .find(|&(_, c)| c == ';' || !(c.is_ascii_alphanumeric() || c == '#'))
            .map(|(k, c)| (k, c == ';'));
        let decoded = end.and_then(|(k, semi)| {
            let name = &tail[..k];
            let c = if let Some(num) = name.strip_prefix('#') {
                let v = match num.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => num.parse::<u32>().ok(),
                }?;
                Some(match v {
                    0x80..=0x9F => cp1252(v as u8),
                    _ => char::from_u32(v).unwrap_or('\u{FFFD}'),
                })
            } else {
                named_entity(name)
            }?;
            Some((c, k + usize::from(semi)))
        });
        match decoded {
            Some((c, used)) => {
                out.push(c);
                rest = &tail[used..];
            }
            None => {
                out.push('&');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

fn named_entity(name: &str) -> Option<char> {
    // HTML 4's character entity references (Latin-1, symbols and Greek, special) and `apos`.
    const NAMES: &str = "nbsp 160 iexcl 161 cent 162 pound 163 curren 164 yen 165 brvbar 166 sect 167 uml 168 \
        copy 169 ordf 170 laquo 171 not 172 shy 173 reg 174 macr 175 deg 176 plusmn 177 sup2 178 sup3 179 \
        acute 180 micro 181 para 182 middot 183 cedil 184 sup1 185 ordm 186 raquo 187 frac14 188 frac12 189 \
        frac34 190 iquest 191 Agrave 192 Aacute 193 Acirc 194 Atilde 195 Auml 196 Aring 197 AElig 198 \
        Ccedil 199 Egrave 200 Eacute 201 Ecirc 202 Euml 203 Igrave 204 Iacute 205 Icirc 206 Iuml 207 ETH 208 \
        Ntilde 209 Ograve 210 Oacute 211 Ocirc 212 Otilde 213 Ouml 214 times 215 Oslash 216 Ugrave 217 \
        Uacute 218 Ucirc 219 Uuml 220 Yacute 221 THORN 222 szlig 223 agrave 224 aacute 225 acirc 226 \
        atilde 227 auml 228 aring 229 aelig 230 ccedil 231 egrave 232 eacute 233 ecirc 234 euml 235 \
        igrave 236 iacute 237 icirc 238 iuml 239 eth 240 ntilde 241 ograve 242 oacute 243 ocirc 244 \
        otilde 245 ouml 246 divide 247 oslash 248 ugrave 249 uacute 250 ucirc 251 uuml 252 yacute 253 \
        thorn 254 yuml 255 quot 34 amp 38 lt 60 gt 62 apos 39 OElig 338 oelig 339 Scaron 352 scaron 353 \
        Yuml 376 circ 710 tilde 732 ensp 8194 emsp 8195 thinsp 8201 zwnj 8204 zwj 8205 lrm 8206 rlm 8207 \
        ndash 8211 mdash 8212 lsquo 8216 rsquo 8217 sbquo 8218 ldquo 8220 rdquo 8221 bdquo 8222 \
        dagger 8224 Dagger 8225 permil 8240 lsaquo 8249 rsaquo 8250 euro 8364 fnof 402 Alpha 913 Beta 914 \
        Gamma 915 Delta 916 Epsilon 917 Zeta 918 Eta 919 Theta 920 Iota 921 Kappa 922 Lambda 923 Mu 924 \
        Nu 925 Xi 926 Omicron 927 Pi 928 Rho 929 Sigma 931 Tau 932 Upsilon 933 Phi 934 Chi 935 Psi 936 \
        Omega 937 alpha 945 beta 946 gamma 947 delta 948 epsilon 949 zeta 950 eta 951 theta 952 iota 953 \
        kappa 954 lambda 955 mu 956 nu 957 xi 958 omicron 959 pi 960 rho 961 sigmaf 962 sigma 963 tau 964 \
        upsilon 965 phi 966 chi 967 psi 968 omega 969 thetasym 977 upsih 978 piv 982 bull 8226 \
        hellip 8230 prime 8242 Prime 8243 oline 8254 frasl 8260 weierp 8472 image 8465 real 8476 \
        trade 8482 alefsym 8501 larr 8592 uarr 8593 rarr 8594 darr 8595 harr 8596 crarr 8629 lArr 8656 \
        uArr 8657 rArr 8658 dArr 8659 hArr 8660 forall 8704 part 8706 exist 8707 empty 8709 nabla 8711 \
        isin 8712 notin 8713 ni 8715 prod 8719 sum 8721 minus 8722 lowast 8727 radic 8730 prop 8733 \
        infin 8734 ang 8736 and 8743 or 8744 cap 8745 cup 8746 int 8747 there4 8756 sim 8764 cong 8773 \
        asymp 8776 ne 8800 equiv 8801 le 8804 ge 8805 sub 8834 sup 8835 nsub 8836 sube 8838 supe 8839 \
        oplus 8853 otimes 8855 perp 8869 sdot 8901 lceil 8968 rceil 8969 lfloor 8970 rfloor 8971 \
        lang 9001 rang 9002 loz 9674 spades 9824 clubs 9827 hearts 9829 diams 9830";
    let mut it = NAMES.split_ascii_whitespace();
    while let (Some(n), Some(v)) = (it.next(), it.next()) {
        if n == name {
            return v.parse::<u32>().ok().and_then(char::from_u32);
        }
    }
    None
}
