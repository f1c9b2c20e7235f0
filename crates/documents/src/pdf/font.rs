//! Fonts: how a shown string's bytes become codes, each code's Unicode text and its advance width.
//!
//! Unicode comes from the font's `ToUnicode` CMap first; for simple fonts then from the encoding (a base
//! encoding and `Differences`, glyph names through the Adobe Glyph List, `uniXXXX` and `uXXXX` names), the
//! standard encoding for non-symbolic Type 1 fonts, and finally the code itself where it is printable
//! ASCII. Widths come from `Widths` (simple), `W`/`DW` (composite) or, for the standard 14 fonts that
//! leave them out, their AFM metrics.

use std::cell::RefCell;
use std::rc::Rc;

use super::cmap::CMap;
use super::document::Pdf;
use super::parse::{Dict, Obj};
use super::tables;

/// What kind of font.
#[derive(Debug)]
enum Kind {
    /// One-byte codes (Type 1, TrueType, Type 3, MMType1).
    Simple,
    /// A composite (Type 0) font: codes by its encoding CMap (`None`: Identity, two bytes).
    Composite { encoding: Option<CMap> },
}

/// A loaded font.
#[derive(Debug)]
pub(crate) struct Font {
    kind: Kind,
    to_unicode: Option<CMap>,
    /// Simple fonts: Unicode of each code from the encoding (0: none).
    simple: Box<[u32; 256]>,
    /// Simple fonts: widths from `FirstChar`, in text-space units per unit of font size.
    widths: Vec<f32>,
    first_char: u32,
    /// Composite fonts: (first CID, last CID, width).
    cid_widths: Vec<(u32, u32, f32)>,
    default_width: f32,
    /// AFM widths by WinAnsi code, for a standard font without `Widths`.
    afm: Option<&'static [u16; 256]>,
    /// Courier: every glyph 600.
    monospace: bool,
    pub(crate) bold: bool,
    /// Type 3: glyph space to text space scale (`FontMatrix[0]`), else 1/1000.
    scale: f32,
    /// What each code decoded to, kept after its first use (codes repeat on every page).
    memo: RefCell<Memo>,
}

/// Decoded codes: one-byte codes of simple fonts, two-byte codes of composite fonts.
#[derive(Debug, Default)]
struct Memo {
    /// By code: 0 when not decoded yet, else 1 + its index in `glyphs`.
    slot: Vec<u32>,
    /// (start, end) of the code's text in `text`, its width.
    glyphs: Vec<(u32, u32, f32)>,
    text: String,
}

/// The Unicode text of a glyph name: the Adobe Glyph List, `uniXXXX[XXXX…]`, `uXXXX[XX]`, and names with a
/// suffix (`a.sc`, `f_i` ligatures joined).
pub(crate) fn glyph_unicode(name: &str) -> Option<String> {
    let base = name.split('.').next().unwrap_or(name);
    if base.contains('_') {
        let parts: Option<String> = base.split('_').map(glyph_unicode).collect();
        return parts;
    }
    if let Ok(i) = tables::GLYPHS.binary_search_by(|(n, _)| (*n).cmp(base)) {
        return char::from_u32(tables::GLYPHS[i].1).map(String::from);
    }
    if let Some(hex) = base.strip_prefix("uni") {
        if hex.len() >= 4 && hex.len() % 4 == 0 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            let units: Vec<u16> = (0..hex.len() / 4)
                .filter_map(|k| u16::from_str_radix(&hex[k * 4..k * 4 + 4], 16).ok())
                .collect();
            return Some(String::from_utf16_lossy(&units));
        }
    }
    if let Some(hex) = base.strip_prefix('u') {
        if (4..=6).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return u32::from_str_radix(hex, 16)
                .ok()
                .and_then(char::from_u32)
                .map(String::from);
        }
    }
    None
}

/// The WinAnsi code of a character (for the AFM width tables).
fn win_ansi_code(c: u32) -> Option<usize> {
    if (32..127).contains(&c) || (160..256).contains(&c) {
        return Some(c as usize);
    }
    tables::WIN_ANSI
        .iter()
        .position(|&u| u32::from(u) == c && u != 0)
}

impl Font {
    /// Loads the font dictionary `d`.
    pub(crate) fn load(pdf: &Pdf, d: &Dict) -> Font {
        let subtype = pdf.get(d, b"Subtype");
        let subtype = subtype.as_name().unwrap_or(b"Type1");
        let base_font = pdf.get(d, b"BaseFont");
        let base = String::from_utf8_lossy(base_font.as_name().unwrap_or(b"")).into_owned();
        // A subset's name has a six-letter tag: `ABCDEF+Times-Bold`.
        let plain = base
            .split_once('+')
            .map_or(base.as_str(), |(_, n)| n)
            .to_owned();
        let to_unicode = match pdf.get(d, b"ToUnicode") {
            Obj::Stream(s) => pdf.decode_stream(&s).ok().map(|b| CMap::parse(&b)),
            _ => None,
        };
        let mut font = Font {
            kind: Kind::Simple,
            to_unicode,
            simple: Box::new([0; 256]),
            widths: Vec::new(),
            first_char: 0,
            cid_widths: Vec::new(),
            default_width: 0.5,
            afm: None,
            monospace: false,
            bold: false,
            scale: 0.001,
            memo: RefCell::default(),
        };
        let lower = plain.to_ascii_lowercase();
        font.bold = ["bold", "black", "heavy", "semibold", "demi"]
            .iter()
            .any(|w| lower.contains(w));
        if subtype == b"Type0" {
            font.load_composite(pdf, d);
        } else {
            font.load_simple(pdf, d, subtype, &plain);
        }
        font
    }

    fn descriptor_flags(pdf: &Pdf, desc: &Obj) -> (i64, f32, f32) {
        let Some(dd) = desc.as_dict() else {
            return (0, 0.0, 0.0);
        };
        let flags = pdf.get(dd, b"Flags").as_i64().unwrap_or(0);
        let weight = pdf.get(dd, b"FontWeight").as_f64().unwrap_or(0.0) as f32;
        let missing = pdf.get(dd, b"MissingWidth").as_f64().unwrap_or(0.0) as f32;
        (flags, weight, missing)
    }

    fn load_simple(&mut self, pdf: &Pdf, d: &Dict, subtype: &[u8], plain: &str) {
        let desc = pdf.get(d, b"FontDescriptor");
        let (flags, weight, missing) = Self::descriptor_flags(pdf, &desc);
        if weight >= 600.0 || flags & (1 << 18) != 0 {
            self.bold = true;
        }
        let symbolic = flags & 4 != 0 && flags & 32 == 0;
        let lower = plain.to_ascii_lowercase();
        // The encoding: a base table, then `Differences`.
        let mut base: Option<&[u16; 256]> = None;
        let mut differences: Vec<(u32, String)> = Vec::new();
        match pdf.get(d, b"Encoding") {
            Obj::Name(n) => base = named_encoding(&n),
            Obj::Dict(e) => {
                if let Some(n) = pdf.get(&e, b"BaseEncoding").as_name() {
                    base = named_encoding(n);
                }
                if let Some(diff) = pdf.get(&e, b"Differences").as_array() {
                    let mut code: i64 = 0;
                    for item in diff {
                        match pdf.resolve(item) {
                            Obj::Int(c) => code = c,
                            Obj::Real(c) => code = c as i64,
                            Obj::Name(n) => {
                                if let Ok(c) = u32::try_from(code) {
                                    if c < 256 {
                                        differences
                                            .push((c, String::from_utf8_lossy(&n).into_owned()));
                                    }
                                }
                                code += 1;
                            }
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
        let is_symbol_font = lower.contains("symbol") || lower.contains("dingbat");
        let table: &[u16; 256] = match base {
            Some(t) => t,
            None if subtype == b"TrueType" && !symbolic => &tables::WIN_ANSI,
            None if symbolic || is_symbol_font || subtype == b"Type3" => &tables::STANDARD,
            None => &tables::STANDARD,
        };
        for (c, slot) in self.simple.iter_mut().enumerate() {
            *slot = u32::from(table[c]);
        }
        if base.is_none() && (subtype == b"TrueType" || subtype == b"Type3") {
            // Without an encoding, printable ASCII stands for itself (TrueType's built-in cmap mostly is).
            for c in 32..127 {
                if self.simple[c] == 0 {
                    self.simple[c] = c as u32;
                }
            }
        }
        for (c, name) in differences {
            if let Some(u) = glyph_unicode(&name) {
                let mut chars = u.chars();
                if let (Some(first), None) = (chars.next(), chars.next()) {
                    self.simple[c as usize] = first as u32;
                } else if let Some(first) = u.chars().next() {
                    // A ligature name: keep its first letter here; ToUnicode usually says the rest.
                    self.simple[c as usize] = ligature_code(&u).unwrap_or(first as u32);
                }
            } else {
                self.simple[c as usize] = 0;
            }
        }
        // Widths.
        self.first_char = pdf.get(d, b"FirstChar").as_i64().unwrap_or(0).clamp(0, 255) as u32;
        if let Some(w) = pdf.get(d, b"Widths").as_array() {
            self.widths = w
                .iter()
                .map(|x| pdf.resolve(x).as_f64().unwrap_or(0.0) as f32)
                .collect();
        }
        if subtype == b"Type3" {
            if let Some(m) = pdf.get(d, b"FontMatrix").as_array() {
                if let Some(a) = m.first().and_then(|x| pdf.resolve(x).as_f64()) {
                    self.scale = a as f32;
                }
            }
        }
        self.default_width = if missing > 0.0 { missing } else { 500.0 };
        if self.widths.is_empty() {
            let (afm, mono) = standard_metrics(&lower, self.bold);
            self.afm = afm;
            self.monospace = mono;
        }
    }

    fn load_composite(&mut self, pdf: &Pdf, d: &Dict) {
        let encoding = match pdf.get(d, b"Encoding") {
            Obj::Name(n) => {
                let n: &[u8] = &n;
                if n.starts_with(b"Identity") {
                    None
                } else {
                    // A predefined CMap (UniGB-UCS2-H, …): codes of two bytes; Unicode from ToUnicode.
                    None
                }
            }
            Obj::Stream(s) => pdf.decode_stream(&s).ok().map(|b| CMap::parse(&b)),
            _ => None,
        };
        self.kind = Kind::Composite { encoding };
        let descendants = pdf.get(d, b"DescendantFonts");
        let Some(first) = descendants
            .as_array()
            .and_then(|a| a.first())
            .map(|o| pdf.resolve(o))
        else {
            return;
        };
        let Some(cid) = first.as_dict() else {
            return;
        };
        let desc = pdf.get(cid, b"FontDescriptor");
        let (flags, weight, _) = Self::descriptor_flags(pdf, &desc);
        if weight >= 600.0 || flags & (1 << 18) != 0 {
            self.bold = true;
        }
        if let Some(name) = pdf.get(cid, b"BaseFont").as_name() {
            let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
            if ["bold", "black", "heavy", "semibold"]
                .iter()
                .any(|w| lower.contains(w))
            {
                self.bold = true;
            }
        }
        self.default_width = pdf.get(cid, b"DW").as_f64().unwrap_or(1000.0) as f32;
        if let Some(w) = pdf.get(cid, b"W").as_array() {
            let items: Vec<Obj> = w.iter().map(|x| pdf.resolve(x)).collect();
            let mut i = 0;
            while i < items.len() && self.cid_widths.len() < 1 << 20 {
                let Some(start) = items[i].as_i64() else {
                    i += 1;
                    continue;
                };
                match items.get(i + 1) {
                    Some(Obj::Array(ws)) => {
                        for (k, wv) in ws.iter().enumerate() {
                            if let Some(wv) = pdf.resolve(wv).as_f64() {
                                let c = (start.max(0) as u32).saturating_add(k as u32);
                                self.cid_widths.push((c, c, wv as f32));
                            }
                        }
                        i += 2;
                    }
                    Some(end) => {
                        if let (Some(end), Some(wv)) =
                            (end.as_i64(), items.get(i + 2).and_then(Obj::as_f64))
                        {
                            self.cid_widths.push((
                                start.max(0) as u32,
                                end.max(0) as u32,
                                wv as f32,
                            ));
                        }
                        i += 3;
                    }
                    None => break,
                }
            }
            self.cid_widths.sort_by_key(|w| w.0);
        }
    }

    /// Decodes a shown string: for each code, `emit(text, width, is_space)` with its Unicode text (empty
    /// when unmapped), its advance (text-space units per unit font size) and whether it is the single-byte
    /// code 32 (which word spacing applies to).
    pub(crate) fn decode(
        &self,
        bytes: &[u8],
        text: &mut String,
        emit: &mut dyn FnMut(&str, f32, bool),
    ) {
        let mut memo = self.memo.borrow_mut();
        let mut i = 0;
        while i < bytes.len() {
            let (code, n) = match &self.kind {
                Kind::Simple => (u32::from(bytes[i]), 1),
                Kind::Composite { encoding } => {
                    let n = match encoding {
                        Some(cm) if cm.has_codespace() => cm.code_len(&bytes[i..], 2),
                        _ => 2.min(bytes.len() - i),
                    };
                    let code = bytes[i..i + n]
                        .iter()
                        .fold(0u32, |a, &x| a << 8 | u32::from(x));
                    (code, n)
                }
            };
            i += n;
            let is_space = n == 1 && code == 32;
            // The memo holds one-byte codes of simple fonts and two-byte codes of composite ones; a composite
            // font's one-byte codes (a two-byte code may share the number) and longer ones are decoded each time.
            let memoized = n == 2 || matches!(self.kind, Kind::Simple);
            if !memoized {
                let width = self.decode_code(code, n, text);
                emit(text, width, is_space);
                continue;
            }
            let at = code as usize;
            if memo.slot.len() <= at {
                memo.slot.resize(at + 1, 0);
            }
            let k = match memo.slot[at] {
                0 => {
                    let width = self.decode_code(code, n, text);
                    let start = memo.text.len() as u32;
                    memo.text.push_str(text);
                    let end = memo.text.len() as u32;
                    memo.glyphs.push((start, end, width));
                    memo.slot[at] = memo.glyphs.len() as u32;
                    memo.glyphs.len() - 1
                }
                k => k as usize - 1,
            };
            let (start, end, width) = memo.glyphs[k];
            emit(&memo.text[start as usize..end as usize], width, is_space);
        }
    }

    /// The text of one code (`n` bytes) into `text` (cleared first), and its width.
    fn decode_code(&self, code: u32, n: usize, text: &mut String) -> f32 {
        text.clear();
        match &self.kind {
            Kind::Simple => {
                let mapped = self
                    .to_unicode
                    .as_ref()
                    .is_some_and(|m| m.unicode(1, code, text) || m.unicode(2, code, text));
                if !mapped {
                    let u = self.simple[code as usize & 0xFF];
                    if let Some(ch) = char::from_u32(u).filter(|_| u != 0) {
                        push_ligature(text, ch);
                    }
                }
                self.simple_width(code as u8)
            }
            Kind::Composite { encoding } => {
                let cid = match encoding {
                    Some(cm) => cm.cid(n as u8, code).unwrap_or(code),
                    None => code,
                };
                if let Some(m) = &self.to_unicode {
                    m.unicode(n as u8, code, text);
                }
                self.cid_width(cid) * 0.001
            }
        }
    }

    fn simple_width(&self, code: u8) -> f32 {
        let c = u32::from(code);
        if c >= self.first_char {
            if let Some(&w) = self.widths.get((c - self.first_char) as usize) {
                if w > 0.0 {
                    return w * self.scale;
                }
            }
        }
        if self.monospace {
            return 0.6;
        }
        if let Some(afm) = self.afm {
            let u = self.simple[code as usize];
            if let Some(w) = win_ansi_code(u).map(|k| afm[k]).filter(|&w| w > 0) {
                return f32::from(w) / 1000.0;
            }
        }
        if !self.widths.is_empty() {
            return self.default_width * self.scale;
        }
        // No metrics at all: half an em, a third for a space.
        if code == 32 {
            0.3
        } else {
            0.5
        }
    }

    fn cid_width(&self, cid: u32) -> f32 {
        let i = self.cid_widths.partition_point(|w| w.0 <= cid);
        if i > 0 {
            let (lo, hi, w) = self.cid_widths[i - 1];
            if cid >= lo && cid <= hi {
                return w;
            }
        }
        self.default_width
    }
}

/// `Fi`-style presentation forms stand for their letters.
fn push_ligature(text: &mut String, ch: char) {
    match ch {
        '\u{FB00}' => text.push_str("ff"),
        '\u{FB01}' => text.push_str("fi"),
        '\u{FB02}' => text.push_str("fl"),
        '\u{FB03}' => text.push_str("ffi"),
        '\u{FB04}' => text.push_str("ffl"),
        '\u{FB05}' | '\u{FB06}' => text.push_str("st"),
        c => text.push(c),
    }
}

fn ligature_code(s: &str) -> Option<u32> {
    Some(match s {
        "ff" => 0xFB00,
        "fi" => 0xFB01,
        "fl" => 0xFB02,
        "ffi" => 0xFB03,
        "ffl" => 0xFB04,
        _ => return None,
    })
}

fn named_encoding(n: &[u8]) -> Option<&'static [u16; 256]> {
    match n {
        b"WinAnsiEncoding" => Some(&tables::WIN_ANSI),
        b"MacRomanEncoding" | b"MacExpertEncoding" => Some(&tables::MAC_ROMAN),
        b"StandardEncoding" => Some(&tables::STANDARD),
        b"PDFDocEncoding" => Some(&tables::PDF_DOC),
        _ => None,
    }
}

/// The AFM widths of a standard font by its name (`Helvetica-Bold`, `Arial,Bold`, `TimesNewRoman`), and
/// whether it is Courier.
fn standard_metrics(lower: &str, bold: bool) -> (Option<&'static [u16; 256]>, bool) {
    let italic = lower.contains("italic") || lower.contains("oblique");
    if lower.contains("courier") || lower.contains("mono") {
        return (None, true);
    }
    if lower.contains("times") || lower.contains("serif") && !lower.contains("sans") {
        return (
            Some(match (bold, italic) {
                (true, true) => &tables::TIMES_BOLD_ITALIC,
                (true, false) => &tables::TIMES_BOLD,
                (false, true) => &tables::TIMES_ITALIC,
                (false, false) => &tables::TIMES,
            }),
            false,
        );
    }
    if lower.contains("symbol") {
        return (Some(&tables::SYMBOL), false);
    }
    if lower.contains("dingbat") {
        return (Some(&tables::ZAPF), false);
    }
    // Helvetica, Arial and anything else: Helvetica's metrics are the closest guess.
    (
        Some(if bold {
            &tables::HELVETICA_BOLD
        } else {
            &tables::HELVETICA
        }),
        false,
    )
}

/// Fonts of a resource dictionary, loaded once per font object.
#[derive(Default)]
pub(crate) struct FontCache {
    by_object: std::collections::HashMap<u32, Rc<Font>>,
}

impl FontCache {
    /// The font `obj` (a font dictionary, or a reference to one).
    pub(crate) fn get(&mut self, pdf: &Pdf, obj: &Obj) -> Option<Rc<Font>> {
        let resolved = pdf.resolve(obj);
        let d = resolved.as_dict()?;
        // Fonts given in place (not by reference) are rare and loaded each time.
        let Obj::Ref(n, _) = obj else {
            return Some(Rc::new(Font::load(pdf, d)));
        };
        if let Some(f) = self.by_object.get(n) {
            return Some(f.clone());
        }
        let f = Rc::new(Font::load(pdf, d));
        self.by_object.insert(*n, f.clone());
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glyph_names() {
        assert_eq!(glyph_unicode("A").as_deref(), Some("A"));
        assert_eq!(glyph_unicode("eacute").as_deref(), Some("é"));
        assert_eq!(glyph_unicode("quoteright").as_deref(), Some("\u{2019}"));
        assert_eq!(glyph_unicode("uni00E9").as_deref(), Some("é"));
        assert_eq!(glyph_unicode("u1F600").as_deref(), Some("😀"));
        assert_eq!(glyph_unicode("f_i").as_deref(), Some("fi"));
        assert_eq!(glyph_unicode("a.sc").as_deref(), Some("a"));
        assert_eq!(glyph_unicode("g123"), None);
    }
}
