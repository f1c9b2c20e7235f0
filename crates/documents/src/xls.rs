//! Excel 97–2003 workbooks (`.xls`): the compound file (CFB) opened by hand, its `Workbook` stream (BIFF8;
//! the `Book` stream of BIFF5 too) read record by record — the shared strings (across `CONTINUE` records),
//! each worksheet's text, number, RK, Boolean and formula-result cells, the cell formats that show dates.
//! An encrypted workbook (`FILEPASS`) is refused. Every chain of sectors is bounded by the file's size, so a
//! damaged file ends in an error, not a loop.

use std::collections::HashMap;

use crate::sheets::{self, CellBudget, Sheet};
use crate::{corrupt, Deadline, DocumentError, Extracted, Format, Limits, Result};

const FORMAT: &str = "XLS";
const END_OF_CHAIN: u32 = 0xFFFF_FFFE;
const FREE: u32 = 0xFFFF_FFFF;

fn bad(detail: impl Into<String>) -> DocumentError {
    corrupt(FORMAT, detail)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A compound file: its sectors, FAT, mini stream and directory.
struct Cfb<'a> {
    bytes: &'a [u8],
    shift: u32,
    mini_shift: u32,
    cutoff: u64,
    fat: Vec<u32>,
    mini_fat: Vec<u32>,
    mini_stream: Vec<u8>,
    /// Directory entries: (name, type, start sector, size).
    entries: Vec<(String, u8, u32, u64)>,
}

impl<'a> Cfb<'a> {
    fn open(bytes: &'a [u8]) -> Result<Self> {
        if !bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]) {
            return Err(bad(
                "not an Excel 97–2003 file (no compound-file signature)",
            ));
        }
        let h = |at| u32_at(bytes, at).ok_or_else(|| bad("truncated header"));
        let shift = u32::from(u16_at(bytes, 30).ok_or_else(|| bad("truncated header"))?);
        let mini_shift = u32::from(u16_at(bytes, 32).ok_or_else(|| bad("truncated header"))?);
        if !(7..=16).contains(&shift) || !(2..=shift).contains(&mini_shift) {
            return Err(bad("impossible sector sizes"));
        }
        let n_fat = h(44)? as usize;
        let first_dir = h(48)?;
        let cutoff = u64::from(h(56)?);
        let first_mini_fat = h(60)?;
        let first_difat = h(68)?;
        let sector_size = 1usize << shift;
        let max_sectors = bytes.len() / sector_size + 1;
        if n_fat > max_sectors {
            return Err(bad("more FAT sectors than the file holds"));
        }
        // The FAT's sectors: 109 in the header, the rest in the DIFAT chain.
        let mut fat_sectors = Vec::with_capacity(n_fat);
        for i in 0..109 {
            if fat_sectors.len() == n_fat {
                break;
            }
            fat_sectors.push(h(76 + i * 4)?);
        }
        let mut difat = first_difat;
        let mut guard = 0;
        while fat_sectors.len() < n_fat && difat != END_OF_CHAIN && difat != FREE {
            let s =
                sector(bytes, shift, difat).ok_or_else(|| bad("DIFAT sector out of the file"))?;
            let per = sector_size / 4 - 1;
            for i in 0..per {
                if fat_sectors.len() == n_fat {
                    break;
                }
                fat_sectors.push(u32_at(s, i * 4).unwrap_or(FREE));
            }
            difat = u32_at(s, per * 4).unwrap_or(END_OF_CHAIN);
            guard += 1;
            if guard > max_sectors {
                return Err(bad("DIFAT chain loops"));
            }
        }
        let mut fat = Vec::with_capacity(n_fat * sector_size / 4);
        for &fs in &fat_sectors {
            let s = sector(bytes, shift, fs).ok_or_else(|| bad("FAT sector out of the file"))?;
            fat.extend(
                s.chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
        }
        let mut cfb = Cfb {
            bytes,
            shift,
            mini_shift,
            cutoff,
            fat,
            mini_fat: Vec::new(),
            mini_stream: Vec::new(),
            entries: Vec::new(),
        };
        let dir = cfb.chain(first_dir, None)?;
        for e in dir.chunks_exact(128) {
            let len = usize::from(u16_at(e, 64).unwrap_or(0)).min(64);
            let units: Vec<u16> = e[..len.saturating_sub(2)]
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            let name = String::from_utf16_lossy(&units);
            let kind = e[66];
            let start = u32_at(e, 116).unwrap_or(END_OF_CHAIN);
            let size = u64::from(u32_at(e, 120).unwrap_or(0));
            cfb.entries.push((name, kind, start, size));
        }
        if first_mini_fat != END_OF_CHAIN && first_mini_fat != FREE {
            let mf = cfb.chain(first_mini_fat, None)?;
            cfb.mini_fat = mf
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
        }
        if let Some(&(_, 5, start, size)) = cfb.entries.first() {
            cfb.mini_stream = cfb.chain(start, Some(size))?;
        }
        Ok(cfb)
    }

    /// The sectors of the chain starting at `start`, `size` bytes of them (all without a size).
    fn chain(&self, start: u32, size: Option<u64>) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = start;
        let mut steps = 0usize;
        while at != END_OF_CHAIN && at != FREE {
            let s = sector(self.bytes, self.shift, at)
                .ok_or_else(|| bad("a sector chain leaves the file"))?;
            out.extend_from_slice(s);
            if size.is_some_and(|n| out.len() as u64 >= n) {
                break;
            }
            at = *self
                .fat
                .get(at as usize)
                .ok_or_else(|| bad("a sector chain leaves the FAT"))?;
            steps += 1;
            if steps > self.fat.len() {
                return Err(bad("a sector chain loops"));
            }
        }
        if let Some(n) = size {
            if (out.len() as u64) < n {
                return Err(bad("a stream is shorter than its directory entry says"));
            }
            out.truncate(n as usize);
        }
        Ok(out)
    }

    /// The stream of the entry named `name` (any case).
    fn stream(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let Some(&(_, _, start, size)) = self
            .entries
            .iter()
            .find(|(n, kind, _, _)| *kind == 2 && n.eq_ignore_ascii_case(name))
        else {
            return Ok(None);
        };
        if size >= self.cutoff {
            return self.chain(start, Some(size)).map(Some);
        }
        // A small stream lives in the mini stream.
        let unit = 1usize << self.mini_shift;
        let mut out = Vec::with_capacity(size as usize);
        let mut at = start;
        let mut steps = 0usize;
        while at != END_OF_CHAIN && at != FREE && (out.len() as u64) < size {
            let from = (at as usize) << self.mini_shift;
            let piece = self
                .mini_stream
                .get(from..from + unit)
                .ok_or_else(|| bad("a mini-stream chain leaves the mini stream"))?;
            out.extend_from_slice(piece);
            at = *self
                .mini_fat
                .get(at as usize)
                .ok_or_else(|| bad("a mini-stream chain leaves the mini FAT"))?;
            steps += 1;
            if steps > self.mini_fat.len() {
                return Err(bad("a mini-stream chain loops"));
            }
        }
        if (out.len() as u64) < size {
            return Err(bad(
                "a small stream is shorter than its directory entry says",
            ));
        }
        out.truncate(size as usize);
        Ok(Some(out))
    }
}

fn sector(bytes: &[u8], shift: u32, index: u32) -> Option<&[u8]> {
    let size = 1usize << shift;
    let from = (index as usize).checked_add(1)?.checked_mul(size)?;
    bytes.get(from..from.checked_add(size)?)
}

/// The records of a BIFF stream: (type, payload, offset of the record).
fn records(stream: &[u8]) -> impl Iterator<Item = (u16, &[u8], usize)> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let kind = u16_at(stream, at)?;
        let len = usize::from(u16_at(stream, at + 2)?);
        let data = stream.get(at + 4..at + 4 + len)?;
        let here = at;
        at += 4 + len;
        Some((kind, data, here))
    })
}

/// Reads characters of a BIFF8 string that may go on in `CONTINUE` records: `segments` are the payloads,
/// a new one starting with an option byte whose bit 0 says whether its characters are 16-bit.
struct Segments<'a> {
    segments: Vec<&'a [u8]>,
    seg: usize,
    at: usize,
}

impl<'a> Segments<'a> {
    fn byte(&mut self) -> Option<u8> {
        self.skip_exhausted();
        let b = *self.segments.get(self.seg)?.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn skip_exhausted(&mut self) {
        while self.seg < self.segments.len() && self.at >= self.segments[self.seg].len() {
            self.seg += 1;
            self.at = 0;
        }
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.byte()?, self.byte()?]))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes([
            self.byte()?,
            self.byte()?,
            self.byte()?,
            self.byte()?,
        ]))
    }

    fn skip(&mut self, mut n: usize) -> Option<()> {
        while n > 0 {
            self.skip_exhausted();
            let seg = self.segments.get(self.seg)?;
            let take = n.min(seg.len() - self.at);
            self.at += take;
            n -= take;
        }
        Some(())
    }

    /// An XLUnicodeRichExtendedString (the shared-string table's entries).
    fn rich_string(&mut self, codepage: u16) -> Option<String> {
        let cch = usize::from(self.u16()?);
        let flags = self.byte()?;
        let runs = if flags & 0x08 != 0 {
            usize::from(self.u16()?)
        } else {
            0
        };
        let ext = if flags & 0x04 != 0 {
            self.u32()? as usize
        } else {
            0
        };
        let s = self.chars(cch, flags & 0x01 != 0, codepage)?;
        self.skip(runs * 4)?;
        self.skip(ext)?;
        Some(s)
    }

    /// `cch` characters, 16-bit when `wide`; at a segment boundary a new option byte says the width.
    fn chars(&mut self, cch: usize, mut wide: bool, codepage: u16) -> Option<String> {
        let mut units: Vec<u16> = Vec::with_capacity(cch.min(1 << 16));
        let mut narrow: Vec<u8> = Vec::new();
        let mut out = String::new();
        let mut left = cch;
        while left > 0 {
            if self.seg < self.segments.len() && self.at >= self.segments[self.seg].len() {
                // The string goes on in the next record, which starts with its own option byte.
                self.seg += 1;
                self.at = 0;
                flush(&mut out, &mut units, &mut narrow, codepage);
                wide = self.byte()? & 0x01 != 0;
                continue;
            }
            if wide {
                units.push(self.u16()?);
            } else {
                narrow.push(self.byte()?);
            }
            left -= 1;
        }
        flush(&mut out, &mut units, &mut narrow, codepage);
        Some(out)
    }
}

fn flush(out: &mut String, units: &mut Vec<u16>, narrow: &mut Vec<u8>, codepage: u16) {
    if !units.is_empty() {
        out.push_str(&String::from_utf16_lossy(units));
        units.clear();
    }
    if !narrow.is_empty() {
        out.push_str(&decode_8bit(narrow, codepage));
        narrow.clear();
    }
}

/// 8-bit text: Windows-1252 (the compressed strings of BIFF8 are Latin-1, which 1252 extends), else
/// Latin-1.
fn decode_8bit(bytes: &[u8], codepage: u16) -> String {
    const CP1252: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž',
        '\u{8f}', '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}',
        'ž', 'Ÿ',
    ];
    bytes
        .iter()
        .map(|&b| match b {
            0x80..=0x9F if codepage == 1252 => CP1252[usize::from(b - 0x80)],
            _ => char::from(b),
        })
        .collect()
}

/// A plain string of a record: BIFF8's XLUnicodeString (16-bit length, option byte) or BIFF5's
/// byte string (16-bit length).
fn record_string(data: &[u8], at: usize, biff8: bool, codepage: u16) -> Option<String> {
    let cch = usize::from(u16_at(data, at)?);
    if biff8 {
        let flags = *data.get(at + 2)?;
        let from = at + 3;
        if flags & 0x01 != 0 {
            let raw = data.get(from..from + cch * 2)?;
            let units: Vec<u16> = raw
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            Some(String::from_utf16_lossy(&units))
        } else {
            Some(decode_8bit(data.get(from..from + cch)?, codepage))
        }
    } else {
        Some(decode_8bit(data.get(at + 2..at + 2 + cch)?, codepage))
    }
}

/// The number of an RK value.
fn rk(v: u32) -> f64 {
    let hundredths = v & 1 != 0;
    let x = if v & 2 != 0 {
        f64::from((v as i32) >> 2)
    } else {
        f64::from_bits(u64::from(v & 0xFFFF_FFFC) << 32)
    };
    if hundredths {
        x / 100.0
    } else {
        x
    }
}

pub(crate) fn read(bytes: &[u8], limits: &Limits, deadline: Deadline) -> Result<Extracted> {
    let cfb = Cfb::open(bytes)?;
    if cfb.entries.iter().any(|(n, _, _, _)| n == "EncryptionInfo") {
        return Err(DocumentError::Encrypted);
    }
    let (stream, biff8) = match cfb.stream("Workbook")? {
        Some(s) => (s, true),
        None => match cfb.stream("Book")? {
            Some(s) => (s, false),
            None => return Err(bad("no Workbook stream (not an Excel workbook)")),
        },
    };
    if stream.len() as u64 > limits.max_unpacked_bytes {
        return Err(DocumentError::Limit(format!(
            "the workbook stream is {} bytes ([documents] max_unpacked_mib)",
            stream.len()
        )));
    }
    // The globals: sheets, shared strings, formats, the code page, the date system.
    let mut codepage: u16 = 1252;
    let mut date1904 = false;
    let mut sheet_list: Vec<(String, usize)> = Vec::new();
    let mut sst_segments: Vec<&[u8]> = Vec::new();
    let mut in_sst = false;
    let mut formats: HashMap<u16, bool> = HashMap::new();
    let mut xf_formats: Vec<u16> = Vec::new();
    for (kind, data, _) in records(&stream) {
        match kind {
            0x000A => break,
            0x002F => return Err(DocumentError::Encrypted),
            0x0042 => codepage = u16_at(data, 0).unwrap_or(1252),
            0x0022 => date1904 = u16_at(data, 0) == Some(1),
            0x0085 => {
                let pos = u32_at(data, 0).unwrap_or(0) as usize;
                let kind = data.get(5).copied().unwrap_or(0);
                let name = if biff8 {
                    let cch = usize::from(data.get(6).copied().unwrap_or(0));
                    let flags = data.get(7).copied().unwrap_or(0);
                    if flags & 1 != 0 {
                        let raw = data.get(8..8 + cch * 2).unwrap_or(&[]);
                        let units: Vec<u16> = raw
                            .chunks_exact(2)
                            .map(|c| u16::from_le_bytes([c[0], c[1]]))
                            .collect();
                        String::from_utf16_lossy(&units)
                    } else {
                        decode_8bit(data.get(8..8 + cch).unwrap_or(&[]), codepage)
                    }
                } else {
                    let cch = usize::from(data.get(6).copied().unwrap_or(0));
                    decode_8bit(data.get(7..7 + cch).unwrap_or(&[]), codepage)
                };
                // Worksheets only (not charts or macro sheets).
                if kind == 0 {
                    sheet_list.push((name, pos));
                }
            }
            0x00FC => {
                sst_segments.push(data);
                in_sst = true;
                continue;
            }
            0x003C if in_sst => {
                sst_segments.push(data);
                continue;
            }
            0x041E => {
                if let Some(id) = u16_at(data, 0) {
                    let code = record_string(data, 2, biff8, codepage).unwrap_or_default();
                    formats.insert(id, sheets::is_date_code(&code));
                }
            }
            0x00E0 => xf_formats.push(u16_at(data, 2).unwrap_or(0)),
            _ => {}
        }
        in_sst = false;
    }
    let shared = shared_strings(sst_segments, codepage);
    let is_date: Vec<bool> = xf_formats
        .iter()
        .map(|id| {
            formats
                .get(id)
                .copied()
                .unwrap_or(matches!(id, 14..=22 | 45..=47))
        })
        .collect();
    if sheet_list.len() > limits.max_pages as usize {
        return Err(DocumentError::Limit(format!(
            "{} sheets, over the limit of {} ([documents] max_pages)",
            sheet_list.len(),
            limits.max_pages
        )));
    }
    let mut budget = CellBudget::new(limits);
    let mut sheets_out = Vec::new();
    for (name, pos) in sheet_list {
        deadline.check()?;
        let body = stream
            .get(pos..)
            .ok_or_else(|| bad(format!("sheet {name:?} starts past the stream's end")))?;
        let mut rows: std::collections::BTreeMap<u32, Vec<(u32, String)>> = Default::default();
        let mut pending_formula: Option<(u32, u32)> = None;
        let mut n = 0usize;
        let value = |x: f64, xf: usize| -> String {
            if is_date.get(xf).copied().unwrap_or(false) {
                sheets::serial_date(x, date1904).unwrap_or_else(|| sheets::number(x))
            } else {
                sheets::number(x)
            }
        };
        for (i, (kind, data, _)) in records(body).enumerate() {
            if i == 0 {
                continue; // its BOF
            }
            n += 1;
            if n.is_multiple_of(65_536) {
                deadline.check()?;
            }
            let rw = u32::from(u16_at(data, 0).unwrap_or(0));
            let col = u32::from(u16_at(data, 2).unwrap_or(0));
            let xf = usize::from(u16_at(data, 4).unwrap_or(0));
            let cell = match kind {
                0x000A | 0x0809 => break,
                0x00FD => u32_at(data, 6).and_then(|i| shared.get(i as usize).cloned()),
                0x0204 | 0x00D6 => record_string(data, 6, biff8, codepage),
                0x0203 => data.get(6..14).map(|b| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    value(f64::from_le_bytes(a), xf)
                }),
                0x027E => u32_at(data, 6).map(|v| value(rk(v), xf)),
                0x00BD => {
                    // MULRK: (format, RK) pairs for consecutive columns.
                    let pairs = data.len().saturating_sub(6) / 6;
                    for k in 0..pairs {
                        let at = 4 + k * 6;
                        let fx = usize::from(u16_at(data, at).unwrap_or(0));
                        if let Some(v) = u32_at(data, at + 2) {
                            budget.take(1)?;
                            rows.entry(rw)
                                .or_default()
                                .push((col + k as u32, value(rk(v), fx)));
                        }
                    }
                    None
                }
                0x0205 => match (data.get(6), data.get(7)) {
                    (Some(&v), Some(&0)) => Some(if v != 0 { "TRUE" } else { "FALSE" }.to_owned()),
                    _ => None,
                },
                0x0006 => {
                    let result = data.get(6..14).unwrap_or(&[0; 8]);
                    if result[6] == 0xFF && result[7] == 0xFF {
                        match result[0] {
                            0 => {
                                pending_formula = Some((rw, col));
                                None
                            }
                            1 => Some(if result[2] != 0 { "TRUE" } else { "FALSE" }.to_owned()),
                            _ => None,
                        }
                    } else {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(result);
                        Some(value(f64::from_le_bytes(a), xf))
                    }
                }
                0x0207 => {
                    if let Some((r, c)) = pending_formula.take() {
                        if let Some(s) = record_string(data, 0, biff8, codepage) {
                            if !s.trim().is_empty() {
                                budget.take(1)?;
                                rows.entry(r).or_default().push((c, s));
                            }
                        }
                    }
                    None
                }
                _ => None,
            };
            if let Some(text) = cell.filter(|t| !t.trim().is_empty()) {
                budget.take(1)?;
                rows.entry(rw).or_default().push((col, text));
            }
        }
        let rows = rows
            .into_values()
            .map(|mut r| {
                r.sort_by_key(|(c, _)| *c);
                r
            })
            .collect();
        sheets_out.push(Sheet { name, rows });
    }
    Ok(sheets::emit(sheets_out, Format::Xls, None, deadline))
}

/// The shared-string table from the `SST` record and its `CONTINUE`s.
fn shared_strings(segments: Vec<&[u8]>, codepage: u16) -> Vec<String> {
    let Some(first) = segments.first() else {
        return Vec::new();
    };
    let unique = u32_at(first, 4).unwrap_or(0) as usize;
    let mut reader = Segments {
        segments,
        seg: 0,
        at: 8,
    };
    let mut out = Vec::with_capacity(unique.min(1 << 20));
    for _ in 0..unique {
        match reader.rich_string(codepage) {
            Some(s) => out.push(s),
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rk_numbers() {
        // 1 as an integer RK (1 << 2 | 2), 2.71 as hundredths (271 << 2 | 3).
        assert_eq!(rk((1 << 2) | 2), 1.0);
        assert_eq!(rk((271 << 2) | 3), 2.71);
        // 1.5 as the high bits of an IEEE double.
        let bits = (1.5f64.to_bits() >> 32) as u32;
        assert_eq!(rk(bits), 1.5);
    }

    #[test]
    fn strings_go_on_across_continue_records() {
        // "abcdef": 3 compressed characters in the SST record, 3 wide ones after a CONTINUE's option byte.
        let sst = [1u8, 0, 0, 0, 1, 0, 0, 0, 6, 0, 0, b'a', b'b', b'c'];
        let cont = [1u8, b'd', 0, b'e', 0, b'f', 0];
        assert_eq!(shared_strings(vec![&sst, &cont], 1252), ["abcdef"]);
    }

    #[test]
    fn not_a_compound_file() {
        assert!(matches!(
            read(
                b"not xls",
                &Limits::default(),
                Deadline::new(std::time::Duration::from_secs(5))
            ),
            Err(DocumentError::Corrupt { .. })
        ));
    }
}
