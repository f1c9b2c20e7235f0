//! CMaps: the code spaces of a composite font's encoding (how many bytes a code has) and the `ToUnicode`
//! maps (`bfchar`, `bfrange` with a start value or an array, `cidchar`/`cidrange` for encodings). Ranges are
//! kept as ranges, never expanded, so a `<0000> <FFFF>` line costs nothing.

use super::parse::{Lexer, Token};

/// What a code maps to.
#[derive(Debug, Clone)]
enum Target {
    /// Unicode text (a ligature may be several characters).
    Text(Box<str>),
    /// A range's first value, counted up by the code's offset in the range (UTF-16 code units).
    Start(Vec<u16>),
    /// A CID (encoding CMaps) counted up from here.
    Cid(u32),
    /// An array of targets, one per code of the range.
    Each(Vec<Box<str>>),
}

/// A parsed CMap.
#[derive(Debug, Clone, Default)]
pub(crate) struct CMap {
    /// Code space ranges: (bytes, low, high).
    codespace: Vec<(u8, u32, u32)>,
    /// Single codes, sorted by (bytes, code) once built.
    singles: Vec<(u8, u32, Target)>,
    /// Ranges: (bytes, low, high, target).
    ranges: Vec<(u8, u32, u32, Target)>,
}

fn code_of(b: &[u8]) -> Option<(u8, u32)> {
    if b.is_empty() || b.len() > 4 {
        return None;
    }
    Some((
        b.len() as u8,
        b.iter().fold(0u32, |a, &x| a << 8 | u32::from(x)),
    ))
}

fn utf16_text(b: &[u8]) -> Box<str> {
    if b.len() == 1 {
        return char::from(b[0]).to_string().into();
    }
    let u: Vec<u16> = b
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
        .collect();
    String::from_utf16_lossy(&u).into()
}

impl CMap {
    /// Parses a CMap's text (a `ToUnicode` stream or an embedded encoding).
    pub(crate) fn parse(data: &[u8]) -> CMap {
        let mut cm = CMap::default();
        let mut lx = Lexer::new(data, 0);
        let mut operands: Vec<Token> = Vec::new();
        let mut mode: &[u8] = b"";
        let mut count = 0usize;
        while let Some(t) = lx.token() {
            count += 1;
            if count > 4_000_000 {
                break;
            }
            match t {
                Token::Keyword(k) => match k {
                    b"begincodespacerange"
                    | b"beginbfchar"
                    | b"beginbfrange"
                    | b"begincidchar"
                    | b"begincidrange" => {
                        mode = k;
                        operands.clear();
                    }
                    b"endcodespacerange" | b"endbfchar" | b"endbfrange" | b"endcidchar"
                    | b"endcidrange" => {
                        cm.entries(mode, &operands);
                        mode = b"";
                        operands.clear();
                    }
                    _ => {
                        if mode.is_empty() {
                            operands.clear();
                        }
                    }
                },
                Token::ArrayOpen => {
                    // Collect the array's strings into one token list marker.
                    let mut items = Vec::new();
                    while let Some(i) = lx.token() {
                        match i {
                            Token::ArrayClose => break,
                            Token::Str(s) => items.push(s),
                            Token::Name(n) => items.push(name_text(n).into_bytes()),
                            _ => {}
                        }
                    }
                    operands.push(Token::Keyword(b"["));
                    for s in items {
                        operands.push(Token::Str(s));
                    }
                    operands.push(Token::Keyword(b"]"));
                }
                other => {
                    if !mode.is_empty() {
                        operands.push(other);
                    }
                }
            }
        }
        cm.singles.sort_by_key(|(n, c, _)| (*n, *c));
        cm
    }

    fn entries(&mut self, mode: &[u8], ops: &[Token]) {
        let mut i = 0;
        while i < ops.len() {
            match mode {
                b"begincodespacerange" => {
                    if let (Some(Token::Str(lo)), Some(Token::Str(hi))) =
                        (ops.get(i), ops.get(i + 1))
                    {
                        if let (Some((n, l)), Some((_, h))) = (code_of(lo), code_of(hi)) {
                            self.codespace.push((n, l, h));
                        }
                    }
                    i += 2;
                }
                b"beginbfchar" => {
                    if let (Some(Token::Str(src)), Some(dst)) = (ops.get(i), ops.get(i + 1)) {
                        if let Some((n, c)) = code_of(src) {
                            let text = match dst {
                                Token::Str(d) => Some(utf16_text(d)),
                                Token::Name(nm) => Some(name_text(nm).into()),
                                _ => None,
                            };
                            if let Some(t) = text {
                                self.singles.push((n, c, Target::Text(t)));
                            }
                        }
                    }
                    i += 2;
                }
                b"beginbfrange" => {
                    let (Some(Token::Str(lo)), Some(Token::Str(hi))) = (ops.get(i), ops.get(i + 1))
                    else {
                        i += 1;
                        continue;
                    };
                    let (Some((n, l)), Some((_, h))) = (code_of(lo), code_of(hi)) else {
                        i += 3;
                        continue;
                    };
                    match ops.get(i + 2) {
                        Some(Token::Str(d)) => {
                            let units: Vec<u16> = if d.len() == 1 {
                                vec![u16::from(d[0])]
                            } else {
                                d.chunks(2)
                                    .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                                    .collect()
                            };
                            if h >= l {
                                self.ranges.push((n, l, h, Target::Start(units)));
                            }
                            i += 3;
                        }
                        Some(Token::Keyword(b"[")) => {
                            let mut j = i + 3;
                            let mut each = Vec::new();
                            while let Some(Token::Str(s)) = ops.get(j) {
                                each.push(utf16_text(s));
                                j += 1;
                            }
                            if h >= l {
                                self.ranges.push((n, l, h, Target::Each(each)));
                            }
                            i = j + 1;
                        }
                        _ => i += 3,
                    }
                }
                b"begincidchar" => {
                    if let (Some(Token::Str(src)), Some(Token::Int(cid))) =
                        (ops.get(i), ops.get(i + 1))
                    {
                        if let (Some((n, c)), Ok(cid)) = (code_of(src), u32::try_from(*cid)) {
                            self.singles.push((n, c, Target::Cid(cid)));
                        }
                    }
                    i += 2;
                }
                b"begincidrange" => {
                    if let (Some(Token::Str(lo)), Some(Token::Str(hi)), Some(Token::Int(cid))) =
                        (ops.get(i), ops.get(i + 1), ops.get(i + 2))
                    {
                        if let (Some((n, l)), Some((_, h)), Ok(cid)) =
                            (code_of(lo), code_of(hi), u32::try_from(*cid))
                        {
                            if h >= l {
                                self.ranges.push((n, l, h, Target::Cid(cid)));
                            }
                        }
                    }
                    i += 3;
                }
                _ => i += 1,
            }
        }
    }

    /// The code space: how many bytes the code at the start of `bytes` has (the spec's matching of code
    /// space ranges; 2 where no range matches a composite font's code, 1 for simple fonts' maps).
    pub(crate) fn code_len(&self, bytes: &[u8], default: usize) -> usize {
        if self.codespace.is_empty() {
            return default.min(bytes.len()).max(1);
        }
        for n in 1..=4u8 {
            if bytes.len() < usize::from(n) {
                break;
            }
            let code = bytes[..usize::from(n)]
                .iter()
                .fold(0u32, |a, &x| a << 8 | u32::from(x));
            if self
                .codespace
                .iter()
                .any(|&(len, lo, hi)| len == n && code >= lo && code <= hi)
            {
                return usize::from(n);
            }
        }
        default.min(bytes.len()).max(1)
    }

    /// Whether any code space range was given.
    pub(crate) fn has_codespace(&self) -> bool {
        !self.codespace.is_empty()
    }

    /// The Unicode text of a code (`bytes` long), into `out`; false when unmapped.
    pub(crate) fn unicode(&self, bytes: u8, code: u32, out: &mut String) -> bool {
        if let Ok(i) = self
            .singles
            .binary_search_by_key(&(bytes, code), |(n, c, _)| (*n, *c))
        {
            if let Target::Text(t) = &self.singles[i].2 {
                out.push_str(t);
                return true;
            }
        }
        // Later ranges override earlier ones, as in the file.
        for (n, lo, hi, target) in self.ranges.iter().rev() {
            if *n != bytes || code < *lo || code > *hi {
                continue;
            }
            let off = code - lo;
            match target {
                Target::Start(units) => {
                    let Some((last, head)) = units.split_last() else {
                        return true;
                    };
                    let last = last.wrapping_add(off as u16);
                    let tail = std::iter::once(last);
                    out.extend(
                        char::decode_utf16(head.iter().copied().chain(tail))
                            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)),
                    );
                    return true;
                }
                Target::Each(items) => {
                    if let Some(t) = items.get(off as usize) {
                        out.push_str(t);
                        return true;
                    }
                }
                Target::Text(t) => {
                    out.push_str(t);
                    return true;
                }
                Target::Cid(_) => {}
            }
        }
        false
    }

    /// The CID of a code under an encoding CMap (`None`: unmapped).
    pub(crate) fn cid(&self, bytes: u8, code: u32) -> Option<u32> {
        if let Ok(i) = self
            .singles
            .binary_search_by_key(&(bytes, code), |(n, c, _)| (*n, *c))
        {
            if let Target::Cid(c) = self.singles[i].2 {
                return Some(c);
            }
        }
        for (n, lo, hi, target) in self.ranges.iter().rev() {
            if *n == bytes && code >= *lo && code <= *hi {
                if let Target::Cid(c) = target {
                    return Some(c + (code - lo));
                }
            }
        }
        None
    }
}

/// A glyph name as text (`/A`, `/uni00E9`, `/fi`), for `bfchar` targets given as names.
fn name_text(n: &[u8]) -> String {
    let s = String::from_utf8_lossy(n);
    super::font::glyph_unicode(&s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_unicode_maps() {
        let src = b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap
            1 begincodespacerange <0000> <FFFF> endcodespacerange
            2 beginbfchar <0003> <0041> <0004> <00660069> endbfchar
            2 beginbfrange <0010> <0012> <0061> <0020> <0021> [<0058> <0059>] endbfrange
            endcmap";
        let cm = CMap::parse(src);
        let get = |c| {
            let mut s = String::new();
            cm.unicode(2, c, &mut s).then_some(s)
        };
        assert_eq!(get(3).as_deref(), Some("A"));
        assert_eq!(get(4).as_deref(), Some("fi"));
        assert_eq!(get(0x11).as_deref(), Some("b"));
        assert_eq!(get(0x21).as_deref(), Some("Y"));
        assert_eq!(get(0x99), None);
        assert_eq!(cm.code_len(&[0, 3, 0, 4], 1), 2);
    }
}
