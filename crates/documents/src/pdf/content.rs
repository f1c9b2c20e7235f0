//! The content stream interpreter: runs a page's operators (and its form XObjects') far enough to know
//! where every glyph of text lands — the current transformation matrix, the text and line matrices, the
//! text state (font, size, character and word spacing, horizontal scaling, leading, rise) — and collects
//! upright glyphs with their position, advance, size and font weight, plus the page's ruling rectangles
//! (for tables). Images are not decoded.

use std::collections::HashSet;
use std::rc::Rc;

use super::document::Pdf;
use super::font::{Font, FontCache};
use super::parse::{Dict, Lexer, Obj, Token};

/// A 2-D affine matrix `[a b c d e f]`.
pub(crate) type Matrix = [f64; 6];

pub(crate) const IDENTITY: Matrix = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0];

/// `m` then `n` (row vectors: `p * m * n`).
pub(crate) fn mul(m: &Matrix, n: &Matrix) -> Matrix {
    [
        m[0] * n[0] + m[1] * n[2],
        m[0] * n[1] + m[1] * n[3],
        m[2] * n[0] + m[3] * n[2],
        m[2] * n[1] + m[3] * n[3],
        m[4] * n[0] + m[5] * n[2] + n[4],
        m[4] * n[1] + m[5] * n[3] + n[5],
    ]
}

/// One glyph on the page (device space, y up).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Glyph {
    /// Its text in the page's text buffer: `text[start..end]`.
    pub(crate) start: u32,
    pub(crate) end: u32,
    pub(crate) x0: f32,
    pub(crate) x1: f32,
    /// The baseline.
    pub(crate) y: f32,
    /// The font size on the page.
    pub(crate) size: f32,
    pub(crate) bold: bool,
    /// A white-space glyph.
    pub(crate) space: bool,
    /// A word gap follows (a large `TJ` adjustment).
    pub(crate) gap_after: bool,
}

/// What a page's content gives.
#[derive(Debug, Default)]
pub(crate) struct PageContent {
    pub(crate) text: String,
    pub(crate) glyphs: Vec<Glyph>,
    /// Filled or stroked rectangles and lines: `[x0, y0, x1, y1]`.
    pub(crate) rules: Vec<[f32; 4]>,
    /// Glyphs whose code has no Unicode text.
    pub(crate) unmapped: usize,
}

#[derive(Clone)]
struct GState {
    ctm: Matrix,
    font: Option<Rc<Font>>,
    size: f64,
    char_spacing: f64,
    word_spacing: f64,
    scale: f64,
    leading: f64,
    rise: f64,
}

/// Runs page content.
pub(crate) struct Interpreter<'p, 'a> {
    pdf: &'p Pdf<'a>,
    fonts: &'p mut FontCache,
    out: PageContent,
    gs: GState,
    stack: Vec<GState>,
    tm: Matrix,
    tlm: Matrix,
    /// Operators run so far (a bound against pathological streams).
    ops: usize,
    max_ops: usize,
    forms: HashSet<u32>,
    scratch: String,
    path: Vec<[f64; 4]>,
    path_pos: (f64, f64),
}

impl<'p, 'a> Interpreter<'p, 'a> {
    pub(crate) fn new(pdf: &'p Pdf<'a>, fonts: &'p mut FontCache, base: Matrix) -> Self {
        Self {
            pdf,
            fonts,
            out: PageContent::default(),
            gs: GState {
                ctm: base,
                font: None,
                size: 0.0,
                char_spacing: 0.0,
                word_spacing: 0.0,
                scale: 1.0,
                leading: 0.0,
                rise: 0.0,
            },
            stack: Vec::new(),
            tm: IDENTITY,
            tlm: IDENTITY,
            ops: 0,
            max_ops: 5_000_000,
            forms: HashSet::new(),
            scratch: String::new(),
            path: Vec::new(),
            path_pos: (0.0, 0.0),
        }
    }

    pub(crate) fn finish(self) -> PageContent {
        self.out
    }

    /// Runs `data` with `resources`, at form-nesting depth `depth`.
    pub(crate) fn run(&mut self, data: &[u8], resources: Option<&Dict>, depth: usize) {
        let mut lx = Lexer::new(data, 0);
        let mut operands: Vec<Obj> = Vec::with_capacity(8);
        while let Some(tok) = lx.token() {
            let op = match tok {
                Token::Keyword(k) => k,
                Token::ArrayClose | Token::DictClose => continue,
                t => {
                    if let Some(o) = lx.object_from(t, 0) {
                        if operands.len() < 64 {
                            operands.push(o);
                        }
                    }
                    continue;
                }
            };
            self.ops += 1;
            if self.ops > self.max_ops {
                return;
            }
            if op == b"BI" {
                skip_inline_image(&mut lx);
                operands.clear();
                continue;
            }
            self.operator(op, &operands, resources, depth);
            operands.clear();
        }
    }

    fn num(ops: &[Obj], i: usize) -> f64 {
        ops.get(i).and_then(Obj::as_f64).unwrap_or(0.0)
    }

    fn operator(&mut self, op: &[u8], ops: &[Obj], resources: Option<&Dict>, depth: usize) {
        let n = |i| Self::num(ops, i);
        match op {
            b"q" if self.stack.len() < 256 => self.stack.push(self.gs.clone()),
            b"Q" => {
                if let Some(g) = self.stack.pop() {
                    self.gs = g;
                }
            }
            b"cm" if ops.len() >= 6 => {
                let m = [n(0), n(1), n(2), n(3), n(4), n(5)];
                self.gs.ctm = mul(&m, &self.gs.ctm);
            }
            b"BT" => {
                self.tm = IDENTITY;
                self.tlm = IDENTITY;
            }
            b"Tf" => {
                self.gs.size = n(1);
                if let Some(name) = ops.first().and_then(Obj::as_name) {
                    self.gs.font = resources
                        .map(|r| self.pdf.get(r, b"Font"))
                        .and_then(|f| f.as_dict().and_then(|d| d.get(name)).cloned())
                        .and_then(|f| self.fonts.get(self.pdf, &f));
                }
            }
            b"Tc" => self.gs.char_spacing = n(0),
            b"Tw" => self.gs.word_spacing = n(0),
            b"Tz" => self.gs.scale = n(0) / 100.0,
            b"TL" => self.gs.leading = n(0),
            b"Ts" => self.gs.rise = n(0),
            b"Td" => self.next_line(n(0), n(1)),
            b"TD" => {
                self.gs.leading = -n(1);
                self.next_line(n(0), n(1));
            }
            b"Tm" if ops.len() >= 6 => {
                self.tm = [n(0), n(1), n(2), n(3), n(4), n(5)];
                self.tlm = self.tm;
            }
            b"T*" => self.next_line(0.0, -self.gs.leading),
            b"Tj" => {
                if let Some(s) = ops.first().and_then(Obj::as_str) {
                    self.show(s);
                }
            }
            b"'" => {
                self.next_line(0.0, -self.gs.leading);
                if let Some(s) = ops.first().and_then(Obj::as_str) {
                    self.show(s);
                }
            }
            b"\"" => {
                self.gs.word_spacing = n(0);
                self.gs.char_spacing = n(1);
                self.next_line(0.0, -self.gs.leading);
                if let Some(s) = ops.get(2).and_then(Obj::as_str) {
                    self.show(s);
                }
            }
            b"TJ" => {
                if let Some(items) = ops.first().and_then(Obj::as_array) {
                    for item in items {
                        match item {
                            Obj::Str(s) => self.show(s),
                            other => {
                                if let Some(adj) = other.as_f64() {
                                    let tx = -adj / 1000.0 * self.gs.size * self.gs.scale;
                                    // A negative adjustment of a third of an em or more is a word gap.
                                    if -adj >= 250.0 {
                                        self.gap();
                                    }
                                    self.tm = mul(&[1.0, 0.0, 0.0, 1.0, tx, 0.0], &self.tm);
                                }
                            }
                        }
                    }
                }
            }
            b"re" if ops.len() >= 4 => {
                let (x, y, w, h) = (n(0), n(1), n(2), n(3));
                self.path.push([x, y, x + w, y + h]);
            }
            b"m" => self.path_pos = (n(0), n(1)),
            b"l" => {
                let (x0, y0) = self.path_pos;
                let (x1, y1) = (n(0), n(1));
                // Only horizontal and vertical segments: table rules.
                if (x0 - x1).abs() < 0.5 || (y0 - y1).abs() < 0.5 {
                    self.path
                        .push([x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)]);
                }
                self.path_pos = (x1, y1);
            }
            b"S" | b"s" | b"f" | b"F" | b"f*" | b"B" | b"B*" | b"b" | b"b*" => {
                let ctm = self.gs.ctm;
                for r in self.path.drain(..) {
                    if self.out.rules.len() >= 20_000 {
                        break;
                    }
                    let (ax, ay) = apply(&ctm, r[0], r[1]);
                    let (bx, by) = apply(&ctm, r[2], r[3]);
                    self.out.rules.push([
                        ax.min(bx) as f32,
                        ay.min(by) as f32,
                        ax.max(bx) as f32,
                        ay.max(by) as f32,
                    ]);
                }
            }
            b"n" | b"W" | b"W*" => self.path.clear(),
            b"Do" if depth < 8 => {
                if let Some(name) = ops.first().and_then(Obj::as_name) {
                    self.form(name, resources, depth);
                }
            }
            _ => {}
        }
    }

    fn next_line(&mut self, tx: f64, ty: f64) {
        self.tlm = mul(&[1.0, 0.0, 0.0, 1.0, tx, ty], &self.tlm);
        self.tm = self.tlm;
    }

    /// Marks a word gap after the last glyph.
    fn gap(&mut self) {
        if let Some(last) = self.out.glyphs.last_mut() {
            last.gap_after = true;
        }
    }

    fn show(&mut self, s: &[u8]) {
        let Some(font) = self.gs.font.clone() else {
            return;
        };
        let gs = &self.gs;
        let (size, cs, ws, hs, rise) =
            (gs.size, gs.char_spacing, gs.word_spacing, gs.scale, gs.rise);
        let ctm = gs.ctm;
        let bold = font.bold;
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut tm = self.tm;
        let out = &mut self.out;
        // The text rendering matrix (font size and scaling, rise, then Tm and the CTM): its linear part
        // stays the same over the string, only Tm's translation moves from glyph to glyph.
        let sm: Matrix = [size * hs, 0.0, 0.0, size, 0.0, rise];
        let lin = mul(&mul(&sm, &tm), &ctm);
        let upright = lin[1].abs() < 1e-3 * lin[0].abs().max(1e-9)
            && lin[2].abs() < 1e-3 * lin[3].abs().max(1e-9);
        let glyph_size = (lin[2] * lin[2] + lin[3] * lin[3]).sqrt();
        let keep = upright && lin[0] > 0.0 && lin[3] > 0.0 && glyph_size > 0.5;
        let per_unit = lin[0] / (size * hs).max(1e-9);
        font.decode(s, &mut scratch, &mut |text, w0, is_space| {
            let tx = (w0 as f64 * size + cs + if is_space { ws } else { 0.0 }) * hs;
            if keep && out.glyphs.len() < 4_000_000 {
                if text.is_empty() {
                    out.unmapped += 1;
                } else {
                    // The origin: (0, rise) through Tm, then the CTM.
                    let (ox, oy) = (rise * tm[2] + tm[4], rise * tm[3] + tm[5]);
                    let x = ox * ctm[0] + oy * ctm[2] + ctm[4];
                    let y = ox * ctm[1] + oy * ctm[3] + ctm[5];
                    let start = out.text.len() as u32;
                    let space = text.chars().all(char::is_whitespace);
                    out.text.push_str(text);
                    out.glyphs.push(Glyph {
                        start,
                        end: out.text.len() as u32,
                        x0: x as f32,
                        x1: (x + per_unit * tx) as f32,
                        y: y as f32,
                        size: glyph_size as f32,
                        bold,
                        space,
                        gap_after: false,
                    });
                }
            }
            // Tm moves by tx along its x axis.
            tm[4] += tx * tm[0];
            tm[5] += tx * tm[1];
        });
        self.tm = tm;
        self.scratch = scratch;
    }

    fn form(&mut self, name: &[u8], resources: Option<&Dict>, depth: usize) {
        let Some(xobjects) = resources.map(|r| self.pdf.get(r, b"XObject")) else {
            return;
        };
        let Some(entry) = xobjects.as_dict().and_then(|d| d.get(name)).cloned() else {
            return;
        };
        if let Obj::Ref(num, _) = entry {
            if !self.forms.insert(num) {
                return; // a form drawing itself
            }
        }
        let Obj::Stream(s) = self.pdf.resolve(&entry) else {
            return;
        };
        if s.dict.get(b"Subtype").and_then(Obj::as_name) != Some(b"Form") {
            return;
        }
        let Ok(data) = self.pdf.decode_stream(&s) else {
            return;
        };
        let own = match self.pdf.get(&s.dict, b"Resources") {
            Obj::Dict(d) => Some(d),
            _ => None,
        };
        let matrix = self
            .pdf
            .get(&s.dict, b"Matrix")
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| self.pdf.resolve(x).as_f64())
                    .collect::<Vec<_>>()
            })
            .filter(|m| m.len() == 6)
            .map_or(IDENTITY, |m| [m[0], m[1], m[2], m[3], m[4], m[5]]);
        let saved = (self.gs.clone(), self.tm, self.tlm);
        self.gs.ctm = mul(&matrix, &self.gs.ctm);
        let res: Option<&Dict> = own.as_deref().or(resources);
        self.run(&data, res, depth + 1);
        (self.gs, self.tm, self.tlm) = saved;
        if let Obj::Ref(num, _) = entry {
            self.forms.remove(&num);
        }
    }
}

fn apply(m: &Matrix, x: f64, y: f64) -> (f64, f64) {
    (x * m[0] + y * m[2] + m[4], x * m[1] + y * m[3] + m[5])
}

/// Skips an inline image (`BI … ID <data> EI`).
fn skip_inline_image(lx: &mut Lexer) {
    // The dictionary up to `ID`.
    while let Some(t) = lx.token() {
        if t == Token::Keyword(b"ID") {
            break;
        }
    }
    lx.pos += 1;
    let b = lx.buf;
    while lx.pos + 2 < b.len() {
        if b[lx.pos] == b'E'
            && b[lx.pos + 1] == b'I'
            && lx.pos > 0
            && super::parse::is_white(b[lx.pos - 1])
            && b.get(lx.pos + 2)
                .is_none_or(|&c| super::parse::is_white(c) || super::parse::is_delim(c))
        {
            lx.pos += 2;
            return;
        }
        lx.pos += 1;
    }
    lx.pos = b.len();
}
