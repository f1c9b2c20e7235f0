//! Files a reader must refuse with a clear error — never a panic, a hang or memory without bound.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kgrag_documents::{read, read_path, DocumentError, Format, Limits};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kgrag-documents-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A zip container of `entries` (deflated).
fn zip_of(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut z = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        z.start_file(*name, options).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
    out.into_inner()
}

#[test]
fn encrypted_and_scanned_pdfs_say_what_they_are() {
    let e = read_path(&data("encrypted.pdf"), &Limits::default()).unwrap_err();
    assert!(matches!(e, DocumentError::Encrypted), "{e}");
    assert!(e.to_string().contains("password"), "{e}");
    let s = read_path(&data("scanned.pdf"), &Limits::default()).unwrap_err();
    assert!(matches!(s, DocumentError::NoTextLayer { pages: 1 }), "{s}");
    assert!(s.to_string().contains("OCR is not built in"), "{s}");
}

#[test]
fn truncated_and_corrupt_files_are_errors_or_what_survives() {
    for name in [
        "guilds.pdf",
        "guilds-2col.pdf",
        "guilds.docx",
        "guilds.pptx",
        "guilds-passages.xlsx",
        "guilds-passages.xls",
        "guilds-passages.ods",
        "guilds.epub",
    ] {
        let bytes = std::fs::read(data(name)).unwrap();
        let format = Format::of_path(Path::new(name)).unwrap();
        for keep in [0.1, 0.5, 0.9, 0.99] {
            let cut = (bytes.len() as f64 * keep) as usize;
            match read(&bytes[..cut], format, &Limits::default()) {
                Ok(doc) => assert!(!doc.text.trim().is_empty()),
                Err(DocumentError::Panic { detail, .. }) => {
                    panic!("{name} cut at {keep}: panic {detail}")
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
    let e = read(b"this is not a PDF at all", Format::Pdf, &Limits::default()).unwrap_err();
    assert!(e.to_string().contains("not a readable PDF file"), "{e}");
    let e = read(b"PK\x03\x04 garbage", Format::Docx, &Limits::default()).unwrap_err();
    assert!(e.to_string().contains("DOCX"), "{e}");
    let e = read(b"", Format::Html, &Limits::default()).unwrap_err();
    assert!(matches!(e, DocumentError::Empty), "{e}");
}

#[test]
fn a_zip_bomb_stops_at_the_unpacked_limit() {
    // 64 MiB of zeros deflate to some 64 KiB.
    let bomb = zip_of(&[
        ("word/document.xml", vec![b' '; 64 << 20]),
        ("[Content_Types].xml", b"<Types/>".to_vec()),
    ]);
    assert!(bomb.len() < 1 << 20);
    let limits = Limits {
        max_unpacked_bytes: 16 << 20,
        ..Limits::default()
    };
    let e = read(&bomb, Format::Docx, &limits).unwrap_err();
    assert!(matches!(e, DocumentError::Limit(_)), "{e}");
    assert!(e.to_string().contains("zip bomb"), "{e}");
    // Too many entries.
    let many: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| (format!("f{i}.xml"), b"x".to_vec()))
        .collect();
    let refs: Vec<(&str, Vec<u8>)> = many.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let limits = Limits {
        max_entries: 20,
        ..Limits::default()
    };
    let e = read(&zip_of(&refs), Format::Epub, &limits).unwrap_err();
    assert!(e.to_string().contains("entries"), "{e}");
}

#[test]
fn a_sheet_of_a_million_empty_cells_costs_nothing() {
    let mut sheet = String::from(
        "<worksheet xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\"><dimension ref=\"A1:XFD1048576\"/><sheetData><row r=\"1\"><c r=\"A1\" t=\"inlineStr\"><is><t>only cell</t></is></c>",
    );
    for i in 0..1_000_000u32 {
        sheet.push_str(&format!("<c r=\"B{}\"/>", i + 2));
    }
    sheet.push_str("</row></sheetData></worksheet>");
    let book = r#"<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Big" sheetId="1" r:id="rId1"/></sheets></workbook>"#;
    let rels = r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#;
    let xlsx = zip_of(&[
        ("xl/workbook.xml", book.as_bytes().to_vec()),
        ("xl/_rels/workbook.xml.rels", rels.as_bytes().to_vec()),
        ("xl/worksheets/sheet1.xml", sheet.into_bytes()),
    ]);
    let t = std::time::Instant::now();
    let doc = read(&xlsx, Format::Xlsx, &Limits::default()).unwrap();
    assert!(doc.text.contains("only cell"), "{}", doc.text);
    assert!(doc.text.len() < 200, "{}", doc.text.len());
    assert!(t.elapsed() < Duration::from_secs(60));
    // A sheet of many non-empty cells stops at the cell limit.
    let limits = Limits {
        max_cells: 10,
        ..Limits::default()
    };
    let e = read(
        &std::fs::read(data("guilds-passages.xlsx")).unwrap(),
        Format::Xlsx,
        &limits,
    )
    .unwrap_err();
    assert!(e.to_string().contains("max_cells"), "{e}");
}

#[test]
fn a_file_over_the_size_limit_is_not_read() {
    let dir = scratch("huge");
    let path = dir.join("huge.pdf");
    // A sparse 2 GiB file: refused by its size before a byte is read.
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(2 << 30).unwrap();
    let e = read_path(&path, &Limits::default()).unwrap_err();
    assert!(matches!(e, DocumentError::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains("max_file_mib"), "{e}");
    let e = read_path(&dir.join("notes.csv"), &Limits::default()).unwrap_err();
    assert!(matches!(e, DocumentError::Unsupported { .. }), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_slow_file_stops_at_the_deadline() {
    let limits = Limits {
        deadline: Duration::ZERO,
        ..Limits::default()
    };
    let e = read_path(&data("guilds-2col.pdf"), &limits).unwrap_err();
    assert!(matches!(e, DocumentError::Timeout { .. }), "{e}");
}
