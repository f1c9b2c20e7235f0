//! A PDF file's objects: the cross-reference (tables, streams, hybrid files, incremental updates through
//! `/Prev`), object streams, and a rebuilt index (a scan for `n g obj`) when the cross-reference is missing
//! or wrong. Objects are parsed on demand and kept; references resolve with a depth bound.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::filters;
use super::parse::{is_white, Dict, Lexer, Obj, Stream, Token};

/// A decoded object stream: its objects' (number, offset) table and its data.
type ObjectStream = (Vec<(u32, usize)>, Vec<u8>);

/// Where an object lives.
#[derive(Debug, Clone, Copy)]
enum Entry {
    /// At this byte offset.
    At(usize),
    /// Inside object stream `stream`, at `index`.
    InStream(u32, u32),
}

/// A PDF file's objects.
pub(crate) struct Pdf<'a> {
    bytes: &'a [u8],
    xref: HashMap<u32, Entry>,
    pub(crate) trailer: Dict,
    cache: RefCell<HashMap<u32, Obj>>,
    /// Object streams decoded: their objects' (number, offset) table and data.
    streams: RefCell<HashMap<u32, Rc<ObjectStream>>>,
    /// The byte budget for decoded streams, over the file.
    budget: RefCell<u64>,
    /// A rebuilt index is in use (said in the notes).
    pub(crate) repaired: bool,
    /// Objects being parsed (a `/Length` that refers back to its own stream).
    loading: RefCell<HashSet<u32>>,
}

/// Why a file cannot be opened.
#[derive(Debug)]
pub(crate) enum OpenError {
    NotPdf,
    NoCatalog,
}

impl<'a> Pdf<'a> {
    pub(crate) fn open(bytes: &'a [u8], budget: u64) -> Result<Self, OpenError> {
        let start =
            crate::find(&bytes[..bytes.len().min(1024)], b"%PDF-").ok_or(OpenError::NotPdf)?;
        let bytes = &bytes[start..];
        let mut pdf = Pdf {
            bytes,
            xref: HashMap::new(),
            trailer: Dict::default(),
            cache: RefCell::new(HashMap::new()),
            streams: RefCell::new(HashMap::new()),
            budget: RefCell::new(budget),
            repaired: false,
            loading: RefCell::new(HashSet::new()),
        };
        let ok = pdf.read_xref() && pdf.catalog().is_some();
        if !ok {
            pdf.rebuild();
            if pdf.catalog().is_none() {
                return Err(OpenError::NoCatalog);
            }
        }
        Ok(pdf)
    }

    /// The document catalog.
    pub(crate) fn catalog(&self) -> Option<Rc<Dict>> {
        match self.resolve(self.trailer.get(b"Root")?) {
            Obj::Dict(d) => Some(d),
            _ => None,
        }
    }

    /// Reads the cross-reference from `startxref`, following `/Prev` and `/XRefStm`.
    fn read_xref(&mut self) -> bool {
        let tail_from = self.bytes.len().saturating_sub(2048);
        let Some(at) = rfind(&self.bytes[tail_from..], b"startxref") else {
            return false;
        };
        let mut lx = Lexer::new(self.bytes, tail_from + at + 9);
        let Some(Token::Int(mut offset)) = lx.token() else {
            return false;
        };
        let mut seen = HashSet::new();
        let mut first = true;
        while offset > 0 && (offset as usize) < self.bytes.len() && seen.insert(offset) {
            let Some(trailer) = self.xref_section(offset as usize) else {
                return !first;
            };
            if let Some(Obj::Int(stm)) = trailer.get(b"XRefStm") {
                if let Some(pos) = usize::try_from(*stm).ok().filter(|&p| p < self.bytes.len()) {
                    self.xref_section(pos);
                }
            }
            if first {
                self.trailer = trailer.clone();
                first = false;
            }
            offset = match trailer.get(b"Prev") {
                Some(o) => o.as_i64().unwrap_or(0),
                None => 0,
            };
            if seen.len() > 4096 {
                break;
            }
        }
        !self.xref.is_empty()
    }

    /// One cross-reference section at `pos` (a table with its trailer, or a stream); entries already
    /// known (from newer sections) win. Returns its trailer.
    fn xref_section(&mut self, pos: usize) -> Option<Dict> {
        let mut lx = Lexer::new(self.bytes, pos);
        lx.skip_white();
        if self.bytes[lx.pos..].starts_with(b"xref") {
            lx.pos += 4;
            loop {
                match lx.token()? {
                    Token::Int(first) => {
                        let Some(Token::Int(count)) = lx.token() else {
                            return None;
                        };
                        let count = count.clamp(0, 10_000_000) as u32;
                        let first = u32::try_from(first).ok()?;
                        for k in 0..count {
                            let (
                                Some(Token::Int(off)),
                                Some(Token::Int(_gen)),
                                Some(Token::Keyword(kind)),
                            ) = (lx.token(), lx.token(), lx.token())
                            else {
                                return None;
                            };
                            let num = first.checked_add(k)?;
                            if kind == b"n" && off > 0 {
                                self.xref.entry(num).or_insert(Entry::At(off as usize));
                            }
                        }
                    }
                    Token::Keyword(b"trailer") => {
                        let Some(Token::DictOpen) = lx.token() else {
                            return None;
                        };
                        return lx.dict_body(0);
                    }
                    _ => return None,
                }
            }
        }
        // An xref stream: `n g obj << /Type /XRef … >> stream`.
        let obj = self.parse_at(pos, None)?;
        let Obj::Stream(s) = obj else {
            return None;
        };
        let data = self.decode_stream(&s).ok()?;
        let d = &s.dict;
        let w: Vec<usize> = d
            .get(b"W")?
            .as_array()?
            .iter()
            .map(|x| x.as_i64().unwrap_or(0).clamp(0, 8) as usize)
            .collect();
        if w.len() < 3 {
            return None;
        }
        let size = d.get(b"Size").and_then(Obj::as_i64).unwrap_or(0).max(0);
        let index: Vec<i64> = match d.get(b"Index").and_then(Obj::as_array) {
            Some(a) => a.iter().filter_map(Obj::as_i64).collect(),
            None => vec![0, size],
        };
        let row = w[0] + w[1] + w[2];
        if row == 0 {
            return None;
        }
        let field = |b: &[u8]| b.iter().fold(0u64, |acc, &x| acc << 8 | u64::from(x));
        let mut rows = data.chunks_exact(row);
        for pair in index.chunks_exact(2) {
            let (first, count) = (pair[0].max(0) as u64, pair[1].clamp(0, 10_000_000) as u64);
            for k in 0..count {
                let Some(r) = rows.next() else {
                    break;
                };
                let kind = if w[0] == 0 { 1 } else { field(&r[..w[0]]) };
                let a = field(&r[w[0]..w[0] + w[1]]);
                let b = field(&r[w[0] + w[1]..]);
                let Ok(num) = u32::try_from(first + k) else {
                    continue;
                };
                let entry = match kind {
                    1 if a > 0 => Entry::At(a as usize),
                    2 => match (u32::try_from(a), u32::try_from(b)) {
                        (Ok(stm), Ok(i)) => Entry::InStream(stm, i),
                        _ => continue,
                    },
                    _ => continue,
                };
                self.xref.entry(num).or_insert(entry);
            }
        }
        Some(s.dict.clone())
    }

    /// Rebuilds the index by scanning the file for `n g obj`; the last definition of a number wins. The
    /// trailer is the last `trailer` dictionary, else a catalog found among the objects.
    fn rebuild(&mut self) {
        self.repaired = true;
        self.xref.clear();
        self.cache.borrow_mut().clear();
        let b = self.bytes;
        let mut i = 0;
        let mut trailer: Option<Dict> = None;
        while let Some(off) = crate::find(&b[i..], b"obj") {
            let at = i + off;
            i = at + 3;
            // Back over `g` and `n`.
            let mut j = at;
            while j > 0 && is_white(b[j - 1]) {
                j -= 1;
            }
            let g_end = j;
            while j > 0 && b[j - 1].is_ascii_digit() {
                j -= 1;
            }
            if j == g_end {
                continue;
            }
            while j > 0 && is_white(b[j - 1]) {
                j -= 1;
            }
            let n_end = j;
            while j > 0 && b[j - 1].is_ascii_digit() {
                j -= 1;
            }
            if j == n_end || (j > 0 && !is_white(b[j - 1]) && !super::parse::is_delim(b[j - 1])) {
                continue;
            }
            if let Ok(num) = std::str::from_utf8(&b[j..n_end])
                .unwrap_or("")
                .parse::<u32>()
            {
                self.xref.insert(num, Entry::At(j));
            }
        }
        let mut k = 0;
        while let Some(off) = crate::find(&b[k..], b"trailer") {
            let at = k + off + 7;
            k = at;
            let mut lx = Lexer::new(b, at);
            if let Some(Token::DictOpen) = lx.token() {
                if let Some(d) = lx.dict_body(0) {
                    if d.get(b"Root").is_some() {
                        trailer = Some(d);
                    }
                }
            }
        }
        // Objects in object streams, and a catalog where no trailer names one.
        let numbers: Vec<u32> = self.xref.keys().copied().collect();
        let mut catalog = None;
        for num in numbers {
            let Some(o) = self.object(num) else {
                continue;
            };
            if let Obj::Stream(s) = &o {
                if s.dict.get(b"Type").and_then(Obj::as_name) == Some(b"ObjStm") {
                    if let Some(table) = self.object_stream(num) {
                        for (k, &(n, _)) in table.0.iter().enumerate() {
                            self.xref.entry(n).or_insert(Entry::InStream(num, k as u32));
                        }
                    }
                }
                if trailer.is_none()
                    && s.dict.get(b"Type").and_then(Obj::as_name) == Some(b"XRef")
                    && s.dict.get(b"Root").is_some()
                {
                    trailer = Some(s.dict.clone());
                }
            }
            if let Some(d) = o.as_dict() {
                if d.get(b"Type").and_then(Obj::as_name) == Some(b"Catalog") {
                    catalog = Some(num);
                }
            }
        }
        self.trailer = match (trailer, catalog) {
            (Some(t), _) => t,
            (None, Some(c)) => Dict(vec![(Rc::from(&b"Root"[..]), Obj::Ref(c, 0))]),
            (None, None) => Dict::default(),
        };
        self.cache.borrow_mut().clear();
    }

    /// Object `num` (parsed once, then from the cache).
    pub(crate) fn object(&self, num: u32) -> Option<Obj> {
        if let Some(o) = self.cache.borrow().get(&num) {
            return Some(o.clone());
        }
        if !self.loading.borrow_mut().insert(num) {
            return None;
        }
        let found = match self.xref.get(&num).copied() {
            Some(Entry::At(pos)) => self.parse_at(pos, Some(num)),
            Some(Entry::InStream(stm, index)) => self.in_object_stream(stm, index, num),
            None => None,
        };
        self.loading.borrow_mut().remove(&num);
        let o = found?;
        self.cache.borrow_mut().insert(num, o.clone());
        Some(o)
    }

    /// The object defined at `pos` (`n g obj …`), a stream with its data.
    fn parse_at(&self, pos: usize, expect: Option<u32>) -> Option<Obj> {
        let mut lx = Lexer::new(self.bytes, pos);
        let Some(Token::Int(n)) = lx.token() else {
            return None;
        };
        if expect.is_some_and(|e| i64::from(e) != n) {
            return None;
        }
        let Some(Token::Int(_)) = lx.token() else {
            return None;
        };
        let Some(Token::Keyword(b"obj")) = lx.token() else {
            return None;
        };
        let obj = lx.object().unwrap_or(Obj::Null);
        let Obj::Dict(d) = &obj else {
            return Some(obj);
        };
        match lx.token() {
            Some(Token::Keyword(b"stream")) => {}
            _ => return Some(obj),
        }
        // The data starts after the end of line that follows `stream`.
        let mut start = lx.pos;
        if self.bytes.get(start) == Some(&b'\r') {
            start += 1;
        }
        if self.bytes.get(start) == Some(&b'\n') {
            start += 1;
        }
        let declared = d
            .get(b"Length")
            .map(|l| self.resolve(l))
            .and_then(|l| l.as_i64())
            .and_then(|l| usize::try_from(l).ok());
        let end = match declared {
            Some(len) if self.endstream_at(start.saturating_add(len)) => start + len,
            _ => {
                // A wrong length: up to `endstream`, its end of line left out.
                let e = crate::find(&self.bytes[start.min(self.bytes.len())..], b"endstream")
                    .map_or(self.bytes.len(), |e| start + e);
                let mut e2 = e;
                while e2 > start && matches!(self.bytes[e2 - 1], b'\r' | b'\n') {
                    e2 -= 1;
                }
                e2
            }
        };
        let data: Rc<[u8]> = self.bytes.get(start..end).unwrap_or(&[]).into();
        Some(Obj::Stream(Rc::new(Stream {
            dict: (**d).clone(),
            data,
        })))
    }

    fn endstream_at(&self, pos: usize) -> bool {
        let tail = self.bytes.get(pos..).unwrap_or(&[]);
        let skip = tail.iter().take(4).take_while(|&&b| is_white(b)).count();
        tail[skip..].starts_with(b"endstream")
    }

    fn object_stream(&self, stm: u32) -> Option<Rc<ObjectStream>> {
        if let Some(s) = self.streams.borrow().get(&stm) {
            return Some(s.clone());
        }
        let Some(Obj::Stream(s)) = self.object(stm) else {
            return None;
        };
        let data = self.decode_stream(&s).ok()?;
        let n = s
            .dict
            .get(b"N")
            .and_then(Obj::as_i64)
            .unwrap_or(0)
            .clamp(0, 1 << 20) as usize;
        let first = s
            .dict
            .get(b"First")
            .and_then(Obj::as_i64)
            .unwrap_or(0)
            .max(0) as usize;
        let mut lx = Lexer::new(&data, 0);
        let mut table = Vec::with_capacity(n);
        for _ in 0..n {
            match (lx.token(), lx.token()) {
                (Some(Token::Int(num)), Some(Token::Int(off))) => {
                    if let (Ok(num), Ok(off)) = (u32::try_from(num), usize::try_from(off)) {
                        table.push((num, first.saturating_add(off)));
                    }
                }
                _ => break,
            }
        }
        let entry = Rc::new((table, data));
        self.streams.borrow_mut().insert(stm, entry.clone());
        Some(entry)
    }

    fn in_object_stream(&self, stm: u32, index: u32, num: u32) -> Option<Obj> {
        let s = self.object_stream(stm)?;
        let (table, data) = &*s;
        let pos = table
            .get(index as usize)
            .filter(|(n, _)| *n == num)
            .or_else(|| table.iter().find(|(n, _)| *n == num))?
            .1;
        Lexer::new(data, pos).object()
    }

    /// `obj` with references followed (at most 32 deep); a missing object is `Null`.
    pub(crate) fn resolve(&self, obj: &Obj) -> Obj {
        let mut cur = obj.clone();
        for _ in 0..32 {
            match cur {
                Obj::Ref(n, _) => cur = self.object(n).unwrap_or(Obj::Null),
                other => return other,
            }
        }
        Obj::Null
    }

    /// A dictionary entry resolved.
    pub(crate) fn get(&self, dict: &Dict, key: &[u8]) -> Obj {
        dict.get(key).map_or(Obj::Null, |o| self.resolve(o))
    }

    /// A stream's decoded data, counted against the file's budget.
    pub(crate) fn decode_stream(&self, s: &Stream) -> Result<Vec<u8>, filters::FilterError> {
        let left = *self.budget.borrow();
        let cap = usize::try_from(left).unwrap_or(usize::MAX);
        let out = filters::decode(&s.dict, &s.data, cap, &|o| self.resolve(o))?;
        *self.budget.borrow_mut() = left.saturating_sub(out.len() as u64);
        Ok(out)
    }

    /// Whether the file is encrypted.
    pub(crate) fn encrypted(&self) -> bool {
        !matches!(self.get(&self.trailer, b"Encrypt"), Obj::Null)
    }

    /// The document information's `/Title`.
    pub(crate) fn title(&self) -> Option<String> {
        let info = self.get(&self.trailer, b"Info");
        let t = info.as_dict().map(|d| self.get(d, b"Title"))?;
        let s = text_string(t.as_str()?);
        let s = s.trim();
        (!s.is_empty()).then(|| s.to_owned())
    }
}

/// A page: its dictionary, inherited resources, box and rotation.
pub(crate) struct Page {
    pub(crate) dict: Rc<Dict>,
    pub(crate) resources: Option<Rc<Dict>>,
    /// `[x0, y0, x1, y1]` of the crop box (else the media box).
    pub(crate) bbox: [f64; 4],
    pub(crate) rotate: i64,
}

/// The pages in order, walking the page tree (inheritance of `Resources`, `MediaBox`, `CropBox`,
/// `Rotate`; loops and depth bounded).
pub(crate) fn pages(pdf: &Pdf, max: usize) -> Vec<Page> {
    let mut out = Vec::new();
    let Some(cat) = pdf.catalog() else {
        return out;
    };
    let root = pdf.get(&cat, b"Pages");
    let mut seen = HashSet::new();
    walk(pdf, &root, None, None, 0, 0, &mut seen, &mut out, max);
    out
}

#[allow(clippy::too_many_arguments)]
fn walk(
    pdf: &Pdf,
    node: &Obj,
    res: Option<Rc<Dict>>,
    bbox: Option<[f64; 4]>,
    rotate: i64,
    depth: usize,
    seen: &mut HashSet<usize>,
    out: &mut Vec<Page>,
    max: usize,
) {
    let Obj::Dict(d) = node else {
        return;
    };
    if depth > 64 || out.len() >= max || !seen.insert(Rc::as_ptr(d) as usize) {
        return;
    }
    let res = match pdf.get(d, b"Resources") {
        Obj::Dict(r) => Some(r),
        _ => res,
    };
    let own_box = |key: &[u8]| -> Option<[f64; 4]> {
        let a = pdf.get(d, key);
        let v: Vec<f64> = a
            .as_array()?
            .iter()
            .filter_map(|x| pdf.resolve(x).as_f64())
            .collect();
        (v.len() == 4).then(|| {
            [
                v[0].min(v[2]),
                v[1].min(v[3]),
                v[0].max(v[2]),
                v[1].max(v[3]),
            ]
        })
    };
    let bbox = own_box(b"CropBox")
        .or_else(|| own_box(b"MediaBox"))
        .or(bbox);
    let rotate = pdf.get(d, b"Rotate").as_i64().unwrap_or(rotate);
    let kids = pdf.get(d, b"Kids");
    let is_pages = d.get(b"Type").and_then(Obj::as_name) == Some(b"Pages")
        || (d.get(b"Type").is_none() && kids.as_array().is_some());
    if is_pages {
        if let Some(kids) = kids.as_array() {
            for k in kids {
                walk(
                    pdf,
                    &pdf.resolve(k),
                    res.clone(),
                    bbox,
                    rotate,
                    depth + 1,
                    seen,
                    out,
                    max,
                );
            }
        }
    } else {
        out.push(Page {
            dict: d.clone(),
            resources: res,
            bbox: bbox.unwrap_or([0.0, 0.0, 612.0, 792.0]),
            rotate: rotate.rem_euclid(360),
        });
    }
}

/// A PDF text string: UTF-16 with a byte-order mark, UTF-8 with one, else PDFDocEncoding (Latin-1 here).
pub(crate) fn text_string(b: &[u8]) -> String {
    if b.starts_with(&[0xFE, 0xFF]) {
        let u: Vec<u16> = b[2..]
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        return String::from_utf16_lossy(&u);
    }
    if b.starts_with(&[0xFF, 0xFE]) {
        let u: Vec<u16> = b[2..]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        return String::from_utf16_lossy(&u);
    }
    if let Some(rest) = b.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return String::from_utf8_lossy(rest).into_owned();
    }
    b.iter().map(|&c| char::from(c)).collect()
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if hay.len() < needle.len() {
        return None;
    }
    (0..=hay.len() - needle.len())
        .rev()
        .find(|&i| &hay[i..i + needle.len()] == needle)
}
