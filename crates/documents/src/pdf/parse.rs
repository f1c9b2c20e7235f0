//! PDF's object syntax: a lexer over bytes and the object parser (numbers, names, strings, arrays,
//! dictionaries, references), used for the file's objects and, token by token, for content streams.

use std::rc::Rc;

/// A PDF object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Obj {
    Null,
    Bool(bool),
    Int(i64),
    Real(f64),
    Name(Rc<[u8]>),
    Str(Rc<[u8]>),
    Array(Rc<Vec<Obj>>),
    Dict(Rc<Dict>),
    /// A stream: its dictionary and where its raw data lies in the file.
    Stream(Rc<Stream>),
    Ref(u32, u16),
}

/// A dictionary: keys (names without the slash) and values, in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Dict(pub(crate) Vec<(Rc<[u8]>, Obj)>);

/// A stream's dictionary and raw (still encoded) data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stream {
    pub(crate) dict: Dict,
    pub(crate) data: Rc<[u8]>,
}

impl Dict {
    pub(crate) fn get(&self, key: &[u8]) -> Option<&Obj> {
        self.0.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
    }
}

impl Obj {
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match *self {
            Obj::Int(i) => Some(i as f64),
            Obj::Real(r) if r.is_finite() => Some(r),
            _ => None,
        }
    }

    pub(crate) fn as_i64(&self) -> Option<i64> {
        match *self {
            Obj::Int(i) => Some(i),
            Obj::Real(r) if r.is_finite() => Some(r as i64),
            _ => None,
        }
    }

    pub(crate) fn as_name(&self) -> Option<&[u8]> {
        match self {
            Obj::Name(n) => Some(n),
            _ => None,
        }
    }

    pub(crate) fn as_dict(&self) -> Option<&Dict> {
        match self {
            Obj::Dict(d) => Some(d),
            Obj::Stream(s) => Some(&s.dict),
            _ => None,
        }
    }

    pub(crate) fn as_array(&self) -> Option<&[Obj]> {
        match self {
            Obj::Array(a) => Some(a),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&[u8]> {
        match self {
            Obj::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A lexical token: an object's start or a keyword (content operators included).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token<'a> {
    Int(i64),
    Real(f64),
    Name(&'a [u8]),
    /// A string's bytes (escapes decoded).
    Str(Vec<u8>),
    ArrayOpen,
    ArrayClose,
    DictOpen,
    DictClose,
    /// Any other run of regular characters: `obj`, `R`, `true`, `Tj`, …
    Keyword(&'a [u8]),
}

#[inline]
pub(crate) fn is_white(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t' | b'\x0c' | b'\0')
}

#[inline]
pub(crate) fn is_delim(b: u8) -> bool {
    matches!(
        b,
        b'(' | b')' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'/' | b'%'
    )
}

/// A lexer over a byte slice.
pub(crate) struct Lexer<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

/// Deepest nesting of arrays and dictionaries accepted.
const MAX_DEPTH: usize = 64;

impl<'a> Lexer<'a> {
    pub(crate) fn new(buf: &'a [u8], pos: usize) -> Self {
        Self { buf, pos }
    }

    pub(crate) fn skip_white(&mut self) {
        while let Some(&b) = self.buf.get(self.pos) {
            if is_white(b) {
                self.pos += 1;
            } else if b == b'%' {
                while let Some(&c) = self.buf.get(self.pos) {
                    if c == b'\n' || c == b'\r' {
                        break;
                    }
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    /// The next token (`None` at the end).
    pub(crate) fn token(&mut self) -> Option<Token<'a>> {
        self.skip_white();
        let b = *self.buf.get(self.pos)?;
        match b {
            b'[' => {
                self.pos += 1;
                Some(Token::ArrayOpen)
            }
            b']' => {
                self.pos += 1;
                Some(Token::ArrayClose)
            }
            b'<' if self.buf.get(self.pos + 1) == Some(&b'<') => {
                self.pos += 2;
                Some(Token::DictOpen)
            }
            b'>' if self.buf.get(self.pos + 1) == Some(&b'>') => {
                self.pos += 2;
                Some(Token::DictClose)
            }
            b'<' => Some(Token::Str(self.hex_string())),
            b'(' => Some(Token::Str(self.literal_string())),
            b'/' => {
                self.pos += 1;
                let start = self.pos;
                while let Some(&c) = self.buf.get(self.pos) {
                    if is_white(c) || is_delim(c) {
                        break;
                    }
                    self.pos += 1;
                }
                Some(Token::Name(&self.buf[start..self.pos]))
            }
            b'0'..=b'9' | b'+' | b'-' | b'.' => Some(self.number()),
            b')' | b'>' | b'{' | b'}' => {
                // Stray delimiter: a one-byte keyword, which no parser accepts.
                self.pos += 1;
                Some(Token::Keyword(&self.buf[self.pos - 1..self.pos]))
            }
            _ => {
                let start = self.pos;
                while let Some(&c) = self.buf.get(self.pos) {
                    if is_white(c) || is_delim(c) {
                        break;
                    }
                    self.pos += 1;
                }
                if start == self.pos {
                    self.pos += 1;
                }
                Some(Token::Keyword(&self.buf[start..self.pos]))
            }
        }
    }

    fn number(&mut self) -> Token<'a> {
        let start = self.pos;
        let mut neg = false;
        if matches!(self.buf.get(self.pos), Some(b'+' | b'-')) {
            neg = self.buf[self.pos] == b'-';
            self.pos += 1;
            // Some writers double the sign (`--5`).
            while matches!(self.buf.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
        }
        let mut int: i64 = 0;
        let mut real = false;
        let mut frac = 0.0f64;
        let mut scale = 0.1f64;
        let mut digits = 0;
        while let Some(&c) = self.buf.get(self.pos) {
            match c {
                b'0'..=b'9' => {
                    if real {
                        frac += f64::from(c - b'0') * scale;
                        scale *= 0.1;
                    } else {
                        int = int.saturating_mul(10).saturating_add(i64::from(c - b'0'));
                    }
                    digits += 1;
                }
                b'.' if !real => real = true,
                b'-' | b'+' => {} // `5-` and similar garbage: ignored
                _ => break,
            }
            self.pos += 1;
        }
        if digits == 0 {
            // A lone sign or dot: a keyword nobody knows.
            return Token::Keyword(&self.buf[start..self.pos.max(start + 1).min(self.buf.len())]);
        }
        if real {
            let v = int as f64 + frac;
            Token::Real(if neg { -v } else { v })
        } else {
            Token::Int(if neg { -int } else { int })
        }
    }

    fn hex_string(&mut self) -> Vec<u8> {
        self.pos += 1;
        let (out, used) = super::filters::hex_prefix(self.buf.get(self.pos..).unwrap_or_default());
        self.pos += used;
        out
    }

    fn literal_string(&mut self) -> Vec<u8> {
        self.pos += 1;
        let mut out = Vec::new();
        let mut depth = 1usize;
        while let Some(&c) = self.buf.get(self.pos) {
            self.pos += 1;
            match c {
                b'(' => {
                    depth += 1;
                    out.push(c);
                }
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                    out.push(c);
                }
                b'\\' => {
                    let Some(&e) = self.buf.get(self.pos) else {
                        break;
                    };
                    self.pos += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'\r' => {
                            if self.buf.get(self.pos) == Some(&b'\n') {
                                self.pos += 1;
                            }
                        }
                        b'\n' => {}
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.buf.get(self.pos) {
                                    Some(&d @ b'0'..=b'7') => {
                                        v = v * 8 + u32::from(d - b'0');
                                        self.pos += 1;
                                    }
                                    _ => break,
                                }
                            }
                            out.push((v & 0xFF) as u8);
                        }
                        other => out.push(other),
                    }
                }
                b'\r' => {
                    // An end of line in a string is a line feed, whatever its bytes.
                    if self.buf.get(self.pos) == Some(&b'\n') {
                        self.pos += 1;
                    }
                    out.push(b'\n');
                }
                _ => out.push(c),
            }
        }
        out
    }

    /// Parses one object; a reference `n g R` is recognised after two integers.
    pub(crate) fn object(&mut self) -> Option<Obj> {
        let tok = self.token()?;
        self.object_from(tok, 0)
    }

    pub(crate) fn object_from(&mut self, tok: Token<'a>, depth: usize) -> Option<Obj> {
        if depth > MAX_DEPTH {
            return None;
        }
        Some(match tok {
            Token::Int(i) => {
                // `n g R`?
                let save = self.pos;
                if let Some(Token::Int(g)) = self.token() {
                    if let Some(Token::Keyword(b"R")) = self.token() {
                        if let (Ok(n), Ok(g)) = (u32::try_from(i), u16::try_from(g)) {
                            return Some(Obj::Ref(n, g));
                        }
                    }
                }
                self.pos = save;
                Obj::Int(i)
            }
            Token::Real(r) => Obj::Real(r),
            Token::Name(n) => Obj::Name(decode_name(n)),
            Token::Str(s) => Obj::Str(s.into()),
            Token::ArrayOpen => {
                let mut items = Vec::new();
                loop {
                    let t = self.token()?;
                    match t {
                        Token::ArrayClose => break,
                        Token::DictClose => break,
                        Token::Keyword(k) if k == b"endobj" => break,
                        t => {
                            if let Some(o) = self.object_from(t, depth + 1) {
                                items.push(o);
                            }
                        }
                    }
                    if items.len() > 1 << 20 {
                        return None;
                    }
                }
                Obj::Array(Rc::new(items))
            }
            Token::DictOpen => Obj::Dict(Rc::new(self.dict_body(depth)?)),
            Token::Keyword(k) => match k {
                b"true" => Obj::Bool(true),
                b"false" => Obj::Bool(false),
                b"null" => Obj::Null,
                _ => return None,
            },
            Token::ArrayClose | Token::DictClose => return None,
        })
    }

    /// A dictionary's entries up to its `>>`.
    pub(crate) fn dict_body(&mut self, depth: usize) -> Option<Dict> {
        let mut entries = Vec::new();
        loop {
            let t = self.token()?;
            match t {
                Token::DictClose => break,
                Token::Name(k) => {
                    let save = self.pos;
                    let v = match self.token() {
                        Some(Token::DictClose) => {
                            entries.push((decode_name(k), Obj::Null));
                            break;
                        }
                        Some(Token::Name(n)) => Some(Obj::Name(decode_name(n))),
                        Some(t) => self.object_from(t, depth + 1),
                        None => None,
                    };
                    match v {
                        Some(v) => entries.push((decode_name(k), v)),
                        None => {
                            // A value that does not parse: skip it.
                            if self.pos == save {
                                self.pos += 1;
                            }
                        }
                    }
                }
                Token::Keyword(k) if k == b"endobj" || k == b"stream" => {
                    self.pos -= k.len();
                    break;
                }
                _ => {}
            }
            if entries.len() > 1 << 16 {
                return None;
            }
        }
        Some(Dict(entries))
    }
}

/// A name's bytes with `#xx` escapes decoded.
pub(crate) fn decode_name(raw: &[u8]) -> Rc<[u8]> {
    if !raw.contains(&b'#') {
        return raw.into();
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'#' && i + 2 < raw.len() {
            let hex = |c: u8| char::from(c).to_digit(16);
            if let (Some(h), Some(l)) = (hex(raw[i + 1]), hex(raw[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_objects() {
        let src = b"<< /Type /Page /Kids [1 0 R 2 0 R] /N -3.5 /S (a\\(b\\)\\101\\\nc) /H <48 6 9> /E#20x true >>";
        let o = Lexer::new(src, 0).object().unwrap();
        let d = o.as_dict().unwrap();
        assert_eq!(d.get(b"Type").unwrap().as_name(), Some(&b"Page"[..]));
        assert_eq!(
            d.get(b"Kids").unwrap().as_array().unwrap(),
            &[Obj::Ref(1, 0), Obj::Ref(2, 0)]
        );
        assert_eq!(d.get(b"N").unwrap().as_f64(), Some(-3.5));
        assert_eq!(d.get(b"S").unwrap().as_str(), Some(&b"a(b)Ac"[..]));
        assert_eq!(d.get(b"H").unwrap().as_str(), Some(&b"Hi"[..]));
        assert_eq!(d.get(b"E x"), Some(&Obj::Bool(true)));
    }

    #[test]
    fn survives_garbage() {
        for src in [
            &b"<< /A [ 1 2"[..],
            b"(((",
            b"<<<<<<",
            b"[[[[[[[[",
            b"/A#",
            b"-",
            b"<< /K >>",
        ] {
            let _ = Lexer::new(src, 0).object();
        }
        let deep = vec![b'['; 10_000];
        assert!(Lexer::new(&deep, 0).object().is_none());
    }
}
