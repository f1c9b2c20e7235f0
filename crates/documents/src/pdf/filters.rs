//! Stream filters: Flate (with PNG and TIFF predictors), LZW, ASCIIHex, ASCII85 and RunLength. A damaged
//! Flate stream gives what decoded before the damage (as readers do); every output is capped.

use super::parse::{Dict, Obj};

/// Why a stream could not be decoded.
#[derive(Debug)]
pub(crate) enum FilterError {
    /// An image codec (DCT, JPX, JBIG2, CCITT): never needed for text.
    Image,
    /// A filter this reader does not know.
    Unknown,
    /// The output passed the cap.
    TooLarge,
}

/// Decodes `data` through the filters `dict` names, at most `cap` bytes out.
pub(crate) fn decode(
    dict: &Dict,
    data: &[u8],
    cap: usize,
    resolve: &dyn Fn(&Obj) -> Obj,
) -> Result<Vec<u8>, FilterError> {
    let filters: Vec<Obj> = match dict.get(b"Filter").map(resolve) {
        Some(Obj::Name(n)) => vec![Obj::Name(n)],
        Some(Obj::Array(a)) => a.iter().map(resolve).collect(),
        _ => Vec::new(),
    };
    let params: Vec<Option<Obj>> = match dict
        .get(b"DecodeParms")
        .or_else(|| dict.get(b"DP"))
        .map(resolve)
    {
        Some(Obj::Array(a)) => a.iter().map(|p| Some(resolve(p))).collect(),
        Some(p) => vec![Some(p)],
        None => Vec::new(),
    };
    let mut cur: Vec<u8> = data.to_vec();
    for (i, f) in filters.iter().enumerate() {
        let Some(name) = f.as_name() else {
            continue;
        };
        let parm = params.get(i).cloned().flatten();
        cur = match name {
            b"FlateDecode" | b"Fl" => {
                let out = inflate(&cur, cap)?;
                predict(out, parm.as_ref(), resolve)
            }
            b"LZWDecode" | b"LZW" => {
                let early = parm
                    .as_ref()
                    .and_then(|p| p.as_dict())
                    .and_then(|d| d.get(b"EarlyChange"))
                    .and_then(Obj::as_i64)
                    .unwrap_or(1);
                let out = lzw(&cur, early != 0, cap)?;
                predict(out, parm.as_ref(), resolve)
            }
            b"ASCIIHexDecode" | b"AHx" => ascii_hex(&cur),
            b"ASCII85Decode" | b"A85" => ascii85(&cur),
            b"RunLengthDecode" | b"RL" => run_length(&cur, cap)?,
            b"DCTDecode" | b"DCT" | b"JPXDecode" | b"JBIG2Decode" | b"CCITTFaxDecode" | b"CCF" => {
                return Err(FilterError::Image)
            }
            b"Crypt" => cur,
            _ => return Err(FilterError::Unknown),
        };
        if cur.len() > cap {
            return Err(FilterError::TooLarge);
        }
    }
    Ok(cur)
}

/// zlib (or raw deflate) data; stops at `cap` and at damage, keeping what came before.
fn inflate(data: &[u8], cap: usize) -> Result<Vec<u8>, FilterError> {
    let zlib = data.len() >= 2
        && data[0] & 0x0F == 8
        && (u16::from(data[0]) << 8 | u16::from(data[1])) % 31 == 0;
    let mut d = flate2::Decompress::new(zlib);
    let mut out: Vec<u8> = Vec::with_capacity((data.len() * 4).min(cap).max(64));
    loop {
        if out.len() == out.capacity() {
            if out.len() >= cap {
                return Err(FilterError::TooLarge);
            }
            let grow = out.len().max(4096).min(cap - out.len());
            out.reserve(grow);
        }
        let before_in = d.total_in();
        let before_out = d.total_out();
        let input = &data[(before_in as usize).min(data.len())..];
        match d.decompress_vec(input, &mut out, flate2::FlushDecompress::None) {
            Ok(flate2::Status::StreamEnd) => break,
            Ok(_) => {
                if d.total_in() == before_in && d.total_out() == before_out {
                    break; // no progress: truncated input
                }
            }
            Err(_) => break, // damaged: keep what decoded
        }
        if out.len() > cap {
            return Err(FilterError::TooLarge);
        }
    }
    Ok(out)
}

/// PNG (10–15) and TIFF (2) predictors of Flate and LZW streams.
fn predict(data: Vec<u8>, parm: Option<&Obj>, resolve: &dyn Fn(&Obj) -> Obj) -> Vec<u8> {
    let Some(p) = parm.and_then(|p| p.as_dict()) else {
        return data;
    };
    let get = |k: &[u8], d: i64| p.get(k).map(resolve).and_then(|o| o.as_i64()).unwrap_or(d);
    let predictor = get(b"Predictor", 1);
    if predictor < 2 {
        return data;
    }
    let colors = get(b"Colors", 1).clamp(1, 32) as usize;
    let bpc = get(b"BitsPerComponent", 8).clamp(1, 16) as usize;
    let columns = get(b"Columns", 1).clamp(1, 1 << 20) as usize;
    let bpp = (colors * bpc).div_ceil(8).max(1);
    let row = (colors * bpc * columns).div_ceil(8);
    if predictor == 2 {
        // TIFF: each byte adds the one a pixel before (8-bit components only).
        let mut out = data;
        if bpc == 8 {
            for line in out.chunks_mut(row) {
                for i in bpp..line.len() {
                    line[i] = line[i].wrapping_add(line[i - bpp]);
                }
            }
        }
        return out;
    }
    let mut out = Vec::with_capacity(data.len());
    let mut prev = vec![0u8; row];
    for line in data.chunks(row + 1) {
        let Some((&kind, raw)) = line.split_first() else {
            break;
        };
        let mut cur = raw.to_vec();
        cur.resize(row, 0);
        for i in 0..row {
            let a = if i >= bpp { cur[i - bpp] } else { 0 };
            let b = prev[i];
            let c = if i >= bpp { prev[i - bpp] } else { 0 };
            cur[i] = match kind {
                1 => cur[i].wrapping_add(a),
                2 => cur[i].wrapping_add(b),
                3 => cur[i].wrapping_add(((u16::from(a) + u16::from(b)) / 2) as u8),
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = (
                        (p - i16::from(a)).abs(),
                        (p - i16::from(b)).abs(),
                        (p - i16::from(c)).abs(),
                    );
                    let pred = if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    };
                    cur[i].wrapping_add(pred)
                }
                _ => cur[i],
            };
        }
        out.extend_from_slice(&cur[..raw.len().min(row)]);
        prev = cur;
    }
    out
}

fn lzw(data: &[u8], early: bool, cap: usize) -> Result<Vec<u8>, FilterError> {
    let mut out = Vec::new();
    let mut table: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    table.push(Vec::new()); // 256: clear
    table.push(Vec::new()); // 257: end
    let mut width = 9u32;
    let mut bits: u32 = 0;
    let mut nbits = 0u32;
    let mut prev: Option<Vec<u8>> = None;
    for &byte in data {
        bits = bits << 8 | u32::from(byte);
        nbits += 8;
        while nbits >= width {
            let code = ((bits >> (nbits - width)) & ((1 << width) - 1)) as usize;
            nbits -= width;
            bits &= (1 << nbits) - 1;
            if code == 256 {
                table.truncate(258);
                width = 9;
                prev = None;
                continue;
            }
            if code == 257 {
                return Ok(out);
            }
            let entry = if code < table.len() {
                table[code].clone()
            } else if let Some(p) = &prev {
                let mut e = p.clone();
                e.push(p[0]);
                e
            } else {
                return Ok(out);
            };
            out.extend_from_slice(&entry);
            if out.len() > cap {
                return Err(FilterError::TooLarge);
            }
            if let Some(mut p) = prev.take() {
                if let Some(&first) = entry.first() {
                    p.push(first);
                    if table.len() < 4096 {
                        table.push(p);
                    }
                }
            }
            prev = Some(entry);
            let size = table.len() + usize::from(early);
            width = match size {
                s if s >= 2048 => 12,
                s if s >= 1024 => 11,
                s if s >= 512 => 10,
                _ => 9,
            };
        }
    }
    Ok(out)
}

fn ascii_hex(data: &[u8]) -> Vec<u8> {
    hex_prefix(data).0
}

/// The bytes of hexadecimal digits up to a `>` (white space and other bytes skipped, an odd last digit
/// padded with 0), and how many bytes of `data` that read, the `>` included.
pub(super) fn hex_prefix(data: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(data.len().min(1 << 16) / 2);
    let mut hi: Option<u8> = None;
    let mut used = data.len();
    for (i, &c) in data.iter().enumerate() {
        if c == b'>' {
            used = i + 1;
            break;
        }
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => continue,
        };
        match hi.take() {
            Some(h) => out.push(h << 4 | v),
            None => hi = Some(v),
        }
    }
    if let Some(h) = hi {
        out.push(h << 4);
    }
    (out, used)
}

fn ascii85(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * 4 / 5);
    let mut group = [0u8; 5];
    let mut n = 0;
    let body = data.strip_prefix(b"<~".as_slice()).unwrap_or(data);
    for &c in body {
        match c {
            b'~' => break,
            b'z' if n == 0 => out.extend_from_slice(&[0; 4]),
            b'!'..=b'u' => {
                group[n] = c - b'!';
                n += 1;
                if n == 5 {
                    let v = group.iter().fold(0u64, |acc, &d| acc * 85 + u64::from(d));
                    out.extend_from_slice(&(v as u32).to_be_bytes());
                    n = 0;
                }
            }
            _ => {}
        }
    }
    if n > 1 {
        for slot in group.iter_mut().skip(n) {
            *slot = 84;
        }
        let v = group.iter().fold(0u64, |acc, &d| acc * 85 + u64::from(d));
        out.extend_from_slice(&(v as u32).to_be_bytes()[..n - 1]);
    }
    out
}

fn run_length(data: &[u8], cap: usize) -> Result<Vec<u8>, FilterError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < data.len() {
        let len = data[i];
        i += 1;
        match len {
            128 => break,
            0..=127 => {
                let n = usize::from(len) + 1;
                out.extend_from_slice(&data[i..(i + n).min(data.len())]);
                i += n;
            }
            _ => {
                if let Some(&b) = data.get(i) {
                    out.extend(std::iter::repeat_n(b, 257 - usize::from(len)));
                }
                i += 1;
            }
        }
        if out.len() > cap {
            return Err(FilterError::TooLarge);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn flate_roundtrip_and_truncation() {
        let text = b"BT /F1 12 Tf (Hello) Tj ET ".repeat(200);
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&text).unwrap();
        let z = e.finish().unwrap();
        assert_eq!(inflate(&z, 1 << 20).unwrap(), text);
        let part = inflate(&z[..z.len() / 2], 1 << 20).unwrap();
        assert!(!part.is_empty() && text.starts_with(&part));
        assert!(matches!(inflate(&z, 100), Err(FilterError::TooLarge)));
    }

    #[test]
    fn ascii_filters() {
        assert_eq!(ascii_hex(b"48 65 6C6c6f>"), b"Hello");
        assert_eq!(ascii85(b"<~87cURDZ~>"), b"Hello");
        assert_eq!(
            run_length(&[2, b'a', b'b', b'c', 254, b'x', 128], 100).unwrap(),
            b"abcxxx"
        );
    }
}
