//! `cargo xtask fetch-data NAME [--base-url URL]`: downloads the files of a bundled dataset from where its
//! manifest (`datasets/**.toml`) says they are published, into `$KGRAG_DATA_DIR/<dir>/`.
//!
//! - every file is downloaded to `<file>.part` with `curl --continue-at -` (an interrupted run resumes
//!   where it stopped), its sha256 checked, and only then renamed into place (fsynced first);
//! - a file already present with the right sha256 is left alone; one with another sha256 is an error that
//!   names it (kgrag never overwrites data it did not download);
//! - a checksum mismatch after download removes the `.part` file and names the URL and both sums;
//! - `--base-url URL` replaces where every file comes from (`URL/<path>`): a mirror, or the tests' loopback
//!   server.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{fail, workspace_root, TaskResult};

/// One file of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    /// Path under the dataset's folder.
    pub path: String,
    /// Expected lowercase hex sha256.
    pub sha256: String,
    /// Where it is published.
    pub url: Option<String>,
}

/// What `fetch-data` needs of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataManifest {
    /// Dataset name.
    pub name: String,
    /// Folder under the data directory.
    pub dir: String,
    /// Files by role, de-duplicated by path.
    pub files: Vec<DataFile>,
}

fn text<'a>(table: &'a toml::Table, key: &str, file: &Path) -> TaskResult<&'a str> {
    table
        .get(key)
        .and_then(toml::Value::as_str)
        .ok_or_else(|| fail(format!("{}: no string `{key}`", file.display())))
}

/// Parses a manifest's TOML.
pub fn parse_manifest(source: &str, file: &Path) -> TaskResult<DataManifest> {
    let table: toml::Table = source
        .parse()
        .map_err(|e| fail(format!("{}: {e}", file.display())))?;
    let name = text(&table, "name", file)?.to_owned();
    let dir = text(&table, "dir", file)?.to_owned();
    let download = table
        .get("download")
        .and_then(toml::Value::as_str)
        .unwrap_or_default()
        .trim_end_matches('/')
        .to_owned();
    let mut by_path: BTreeMap<String, DataFile> = BTreeMap::new();
    if let Some(files) = table.get("files").and_then(toml::Value::as_table) {
        for (role, entry) in files {
            let entry = entry
                .as_table()
                .ok_or_else(|| fail(format!("{}: files.{role} is not a table", file.display())))?;
            let path = text(entry, "path", file)?.to_owned();
            let sha256 = text(entry, "sha256", file)?.to_ascii_lowercase();
            let url = entry
                .get("url")
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
                .or_else(|| (!download.is_empty()).then(|| format!("{download}/{path}")));
            by_path
                .entry(path.clone())
                .or_insert(DataFile { path, sha256, url });
        }
    }
    Ok(DataManifest {
        name,
        dir,
        files: by_path.into_values().collect(),
    })
}

/// The manifest of dataset `name` among `datasets/*.toml` and `datasets/*/manifest.toml`.
pub fn find_manifest(name: &str) -> TaskResult<DataManifest> {
    let root = workspace_root().join("datasets");
    let mut candidates = Vec::new();
    for entry in fs::read_dir(&root).map_err(|e| fail(format!("{}: {e}", root.display())))? {
        let path = entry
            .map_err(|e| fail(format!("{}: {e}", root.display())))?
            .path();
        if path.extension().is_some_and(|e| e == "toml") {
            candidates.push(path);
        } else if path.join("manifest.toml").is_file() {
            candidates.push(path.join("manifest.toml"));
        }
    }
    candidates.sort();
    let mut names = Vec::new();
    for path in candidates {
        let source =
            fs::read_to_string(&path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
        let m = parse_manifest(&source, &path)?;
        if m.name == name {
            return Ok(m);
        }
        names.push(m.name);
    }
    Err(fail(format!(
        "no dataset {name:?}; bundled datasets: {}",
        names.join(", ")
    )))
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// Already there with the right sha256.
    Present(PathBuf),
    /// Downloaded (or completed from a partial download) and verified.
    Downloaded(PathBuf),
}

/// Downloads every file of `manifest` into `data_dir/<dir>/`. See the module docs.
pub fn fetch(
    manifest: &DataManifest,
    data_dir: &Path,
    base_url: Option<&str>,
) -> TaskResult<Vec<Fetched>> {
    let dir = data_dir.join(&manifest.dir);
    let mut out = Vec::new();
    for f in &manifest.files {
        let dest = dir.join(&f.path);
        if dest.is_file() {
            let actual = crate::assets::sha256_file(&dest)?;
            if actual == f.sha256 {
                out.push(Fetched::Present(dest));
                continue;
            }
            return Err(fail(format!(
                "{} is there but its sha256 is {actual}, not the manifest's {}; move it away and rerun",
                dest.display(),
                f.sha256
            )));
        }
        let url = match base_url {
            Some(base) => format!("{}/{}", base.trim_end_matches('/'), f.path),
            None => f.url.clone().ok_or_else(|| {
                fail(format!(
                    "dataset {}: the manifest says nowhere where {} is published",
                    manifest.name, f.path
                ))
            })?,
        };
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).map_err(|e| fail(format!("{}: {e}", parent.display())))?;
        }
        let part = dest.with_file_name(format!(
            "{}.part",
            dest.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
        // A partial file that is complete already: curl would ask for the bytes after its end.
        let complete = part.is_file() && crate::assets::sha256_file(&part)? == f.sha256;
        if !complete {
            println!("xtask: downloading {url}");
            let status = Command::new("curl")
                .args([
                    "--fail",
                    "--location",
                    "--silent",
                    "--show-error",
                    "--retry",
                    "3",
                    "--continue-at",
                    "-",
                    "--output",
                ])
                .arg(&part)
                .arg(&url)
                .status()
                .map_err(|e| {
                    fail(format!(
                        "cannot run curl ({e}); install curl or download {url} to {} by hand",
                        dest.display()
                    ))
                })?;
            if !status.success() {
                return Err(fail(format!(
                    "downloading {url} failed (curl {status}); rerun to resume from {}",
                    part.display()
                )));
            }
        }
        let actual = crate::assets::sha256_file(&part)?;
        if actual != f.sha256 {
            let _ = fs::remove_file(&part);
            return Err(fail(format!(
                "{url}: sha256 mismatch: expected {}, downloaded {actual}; the partial file is removed, \
                 so a rerun downloads it again (check the manifest and the source)",
                f.sha256
            )));
        }
        File::open(&part)
            .and_then(|file| file.sync_all())
            .map_err(|e| fail(format!("{}: {e}", part.display())))?;
        fs::rename(&part, &dest).map_err(|e| fail(format!("{}: {e}", dest.display())))?;
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        out.push(Fetched::Downloaded(dest));
    }
    Ok(out)
}

/// The options of `cargo xtask fetch-data`.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The dataset, e.g. musique-100 or ultradomain-mix.
    name: String,
    /// A mirror to download from instead of where the manifest says the files are published.
    #[arg(long)]
    base_url: Option<String>,
}

/// `cargo xtask fetch-data NAME [--base-url URL]`.
pub fn run(o: &Options, data_dir: &Path) -> TaskResult {
    let (name, base_url) = (o.name.clone(), o.base_url.clone());
    let manifest = find_manifest(&name)?;
    for f in fetch(&manifest, data_dir, base_url.as_deref())? {
        match f {
            Fetched::Present(p) => println!("xtask: {} is present and verified", p.display()),
            Fetched::Downloaded(p) => println!("xtask: {} downloaded and verified", p.display()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    use sha2::{Digest, Sha256};

    use super::*;

    /// A loopback HTTP/1.1 server for `files` (path → bytes) that honours `Range: bytes=N-` and records
    /// every request line with its range header.
    fn serve(files: BTreeMap<String, Vec<u8>>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let mut range: Option<usize> = None;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap() == 0 || h.trim().is_empty() {
                        break;
                    }
                    let lower = h.to_ascii_lowercase();
                    if let Some(r) = lower.strip_prefix("range: bytes=") {
                        range = r.trim().trim_end_matches('-').parse().ok();
                    }
                }
                seen.lock().unwrap().push(format!("{path} range={range:?}"));
                let body = files.get(path.trim_start_matches('/'));
                let response = match (body, range) {
                    (None, _) => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                    (Some(b), Some(start)) if start < b.len() => {
                        let mut r = format!(
                            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{}\r\nConnection: close\r\n\r\n",
                            b.len() - start,
                            b.len() - 1,
                            b.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(&b[start..]);
                        r
                    }
                    (Some(b), _) => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            b.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(b);
                        r
                    }
                };
                let _ = stream.write_all(&response);
            }
        });
        (url, log)
    }

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xtask-fetch-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn downloads_verify_resume_and_refuse_bad_checksums() {
        let big: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let small = b"[\"one document\"]".to_vec();
        let files: BTreeMap<String, Vec<u8>> = [
            ("big.bin".to_owned(), big.clone()),
            ("sub/small.json".to_owned(), small.clone()),
            ("bad.json".to_owned(), b"tampered".to_vec()),
        ]
        .into();
        let (url, log) = serve(files);
        let manifest = DataManifest {
            name: "t".into(),
            dir: "t-data".into(),
            files: vec![
                DataFile {
                    path: "big.bin".into(),
                    sha256: sha(&big),
                    url: Some(format!("{url}/big.bin")),
                },
                DataFile {
                    path: "sub/small.json".into(),
                    sha256: sha(&small),
                    url: Some(format!("{url}/sub/small.json")),
                },
            ],
        };
        let data = temp("ok");
        // An interrupted earlier run left the first 100,000 bytes.
        fs::create_dir_all(data.join("t-data")).unwrap();
        fs::write(data.join("t-data/big.bin.part"), &big[..100_000]).unwrap();
        let got = fetch(&manifest, &data, None).unwrap();
        assert!(matches!(&got[0], Fetched::Downloaded(p) if fs::read(p).unwrap() == big));
        assert!(matches!(&got[1], Fetched::Downloaded(p) if fs::read(p).unwrap() == small));
        assert!(!data.join("t-data/big.bin.part").exists());
        let requests = log.lock().unwrap().clone();
        assert!(
            requests.contains(&"/big.bin range=Some(100000)".to_owned()),
            "resumed from the partial file: {requests:?}"
        );
        // A second run finds both and downloads nothing.
        let n = log.lock().unwrap().len();
        let again = fetch(&manifest, &data, None).unwrap();
        assert!(again.iter().all(|f| matches!(f, Fetched::Present(_))));
        assert_eq!(log.lock().unwrap().len(), n);

        // A checksum mismatch: a clear error, nothing left in place.
        let bad = DataManifest {
            name: "t".into(),
            dir: "t-bad".into(),
            files: vec![DataFile {
                path: "bad.json".into(),
                sha256: sha(b"the real content"),
                url: None,
            }],
        };
        let err = fetch(&bad, &data, Some(&url)).unwrap_err().to_string();
        assert!(
            err.contains("sha256 mismatch") && err.contains("bad.json"),
            "{err}"
        );
        assert!(!data.join("t-bad/bad.json").exists());
        assert!(!data.join("t-bad/bad.json.part").exists());
        // A file that is not published: curl fails, the error says so.
        let missing = DataManifest {
            files: vec![DataFile {
                path: "nope.json".into(),
                sha256: sha(b"x"),
                url: None,
            }],
            ..bad
        };
        let err = fetch(&missing, &data, Some(&url)).unwrap_err().to_string();
        assert!(err.contains("nope.json") && err.contains("failed"), "{err}");
        let _ = fs::remove_dir_all(&data);
    }

    #[test]
    fn bundled_manifests_parse_and_ultradomain_mix_fetches_from_a_mirror() {
        let mix = find_manifest("ultradomain-mix").unwrap();
        assert_eq!(mix.dir, "ultradomain-mix");
        // The questions and HiRAG's answers are one file: fetched once.
        assert_eq!(mix.files.len(), 7);
        assert!(mix
            .files
            .iter()
            .all(|f| f.url.as_deref().is_some_and(|u| u.starts_with("https://"))));
        let musique = find_manifest("musique-100").unwrap();
        assert_eq!(musique.files.len(), 3);
        assert!(find_manifest("nope")
            .unwrap_err()
            .to_string()
            .contains("musique-100"));

        // Serve the real files from the data folder and fetch them into an empty one.
        let source = std::env::var_os("KGRAG_DATA_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("datasets"));
        let source = if source.is_absolute() {
            source
        } else {
            workspace_root().join(source)
        };
        if !source.join(&mix.dir).is_dir() {
            let line = format!(
                "missing test data {} (folder {}): set KGRAG_DATA_DIR to the folder that holds {}/, or run \
                 `cargo xtask fetch-data ultradomain-mix`",
                source.join(&mix.dir).display(),
                source.display(),
                mix.dir
            );
            assert!(
                std::env::var_os("KGRAG_REQUIRE_DATA").is_none_or(|v| v.is_empty() || v == "0"),
                "{line} (KGRAG_REQUIRE_DATA is set)"
            );
            eprintln!("skipped: {line}");
            return;
        }
        let files: BTreeMap<String, Vec<u8>> = mix
            .files
            .iter()
            .map(|f| {
                (
                    f.path.clone(),
                    fs::read(source.join("ultradomain-mix").join(&f.path)).unwrap(),
                )
            })
            .collect();
        let (url, _) = serve(files);
        let data = temp("mix");
        let got = fetch(&mix, &data, Some(&url)).unwrap();
        assert_eq!(got.len(), 7);
        assert!(got.iter().all(|f| matches!(f, Fetched::Downloaded(_))));
        let _ = fs::remove_dir_all(&data);
    }
}
