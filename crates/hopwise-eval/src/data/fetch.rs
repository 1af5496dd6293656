//! `hopwise data fetch NAME`: download the release files, verify them, convert them, and record
//! the result. Idempotent: a finished fetch is left alone unless forced; a verified download of an
//! interrupted fetch is reused.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::data::cache::{self, FetchedFile, Manifest};
use crate::data::convert::{convert, Converted, Inputs};
use crate::data::download::{download, Downloaded};
use crate::data::registry::{Entry, SourceFile};
use crate::dataset::load_dataset;
use crate::error::{EvalError, Result};
use crate::results::write_atomic;

#[derive(Debug, Clone, Copy, Default)]
pub struct FetchOptions {
    /// Fetch and convert again even when a finished fetch is cached.
    pub force: bool,
    /// Accept files without a pinned checksum (their sha256 is recorded, not checked).
    pub allow_unpinned: bool,
    /// Keep the downloaded release files next to the converted ones.
    pub keep_downloads: bool,
}

/// Progress for the caller to show.
pub enum FetchEvent<'a> {
    Downloading { file: &'a SourceFile },
    Bytes { done: u64, total: Option<u64> },
    Reused { file: &'a SourceFile },
    Converting,
}

#[derive(Debug, Clone, Serialize)]
pub struct FetchOutcome {
    pub name: String,
    pub already_cached: bool,
    pub questions_file: PathBuf,
    /// `None` when the release has no paragraphs (Bamboogle).
    pub corpus_file: Option<PathBuf>,
    pub manifest: Manifest,
}

fn jsonl<T: Serialize>(items: &[T]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for item in items {
        serde_json::to_writer(&mut out, item).map_err(|e| EvalError::Config(e.to_string()))?;
        out.push(b'\n');
    }
    Ok(out)
}

fn sha256_of(path: &Path) -> Option<String> {
    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).ok()?;
    Some(hex::encode(hasher.finalize()))
}

/// A download already on disk from an interrupted fetch, kept only if it matches its pin.
fn reusable(file: &SourceFile, dir: &Path) -> Option<Downloaded> {
    let path = dir.join(&file.name);
    let pinned = file.sha256.as_ref()?;
    let sha256 = sha256_of(&path)?;
    (sha256 == *pinned).then(|| Downloaded {
        bytes: std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        path,
        sha256,
        pinned: true,
    })
}

fn now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    cache::utc_timestamp(secs)
}

/// Checks that every converted question loads through the normal dataset loader.
fn check_loadable(entry: &Entry, path: &Path, converted: &Converted) -> Result<()> {
    let loaded = load_dataset(path)?;
    if let Some(first) = loaded.skipped.first() {
        return Err(EvalError::Convert {
            name: entry.name.clone(),
            message: format!("{} converted questions do not load (first: {first})", loaded.skipped.len()),
        });
    }
    debug_assert_eq!(loaded.examples.len(), converted.records.len());
    Ok(())
}

/// Fetches, verifies and converts one dataset into the cache under `home`.
pub async fn fetch(
    entry: &Entry,
    home: &Path,
    options: FetchOptions,
    client: &reqwest::Client,
    on_event: &(dyn Fn(FetchEvent) + Sync),
) -> Result<FetchOutcome> {
    let name = entry.name.as_str();
    let dir = cache::dataset_dir(home, name);
    let corpus_path = cache::corpus_file(home, name);
    if let Some(manifest) = cache::manifest(home, name).filter(|_| !options.force) {
        return Ok(FetchOutcome {
            name: name.to_string(),
            already_cached: true,
            questions_file: cache::questions_file(home, name),
            corpus_file: corpus_path.is_file().then_some(corpus_path),
            manifest,
        });
    }
    if let Some(file) = entry.files.iter().find(|f| f.sha256.is_none()).filter(|_| !options.allow_unpinned) {
        return Err(EvalError::Download {
            url: hopwise_models::redact_url(&file.url),
            message: format!(
                "`{name}` has no pinned checksum ({}); pass --allow-unpinned to accept what the URL serves \
                 (its sha256 is then recorded in {}, not checked)",
                file.unpinned.as_deref().unwrap_or("none published"),
                cache::MANIFEST
            ),
        });
    }
    // One fetch per dataset at a time: two would write the same `.part` files.
    std::fs::create_dir_all(&dir).map_err(|e| EvalError::Write { path: dir.clone(), source: e })?;
    let _lock = crate::lock::RunLock::acquire(&dir).map_err(|e| match e {
        EvalError::Busy { out_dir } => EvalError::FetchBusy { name: name.to_string(), dir: out_dir },
        other => other,
    })?;
    let downloads = dir.join("downloads");
    let mut fetched = Vec::new();
    for file in &entry.files {
        let got = match reusable(file, &downloads) {
            Some(done) => {
                on_event(FetchEvent::Reused { file });
                done
            }
            None => {
                on_event(FetchEvent::Downloading { file });
                download(client, file, &downloads, &|done, total| on_event(FetchEvent::Bytes { done, total })).await?
            }
        };
        fetched.push(FetchedFile {
            name: file.name.clone(),
            url: file.url.clone(),
            bytes: got.bytes,
            sha256: got.sha256,
            pinned: got.pinned,
        });
    }

    on_event(FetchEvent::Converting);
    let inputs = Inputs { dataset: name, dir: &downloads, origin: entry.files[0].url.clone() };
    let converted = convert(&entry.format, &inputs)?;
    let questions_path = cache::questions_file(home, name);
    write_atomic(&questions_path, &jsonl(&converted.records)?)?;
    check_loadable(entry, &questions_path, &converted)?;
    let corpus_file = if converted.corpus.is_empty() {
        let _ = std::fs::remove_file(&corpus_path);
        None
    } else {
        write_atomic(&corpus_path, &jsonl(&converted.corpus)?)?;
        Some(corpus_path)
    };
    let manifest = Manifest {
        name: name.to_string(),
        title: entry.title.clone(),
        license: entry.license.clone(),
        homepage: entry.homepage.clone(),
        fetched_at: now(),
        files: fetched,
        questions: converted.records.len(),
        passages: converted.corpus.len(),
    };
    let json = serde_json::to_vec_pretty(&manifest).map_err(|e| EvalError::Config(e.to_string()))?;
    // Written last: its presence marks the fetch finished.
    write_atomic(&dir.join(cache::MANIFEST), &json)?;
    if !options.keep_downloads {
        let _ = std::fs::remove_dir_all(&downloads);
    }
    Ok(FetchOutcome {
        name: name.to_string(),
        already_cached: false,
        questions_file: questions_path,
        corpus_file,
        manifest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::registry::Registry;

    #[tokio::test]
    async fn a_second_fetch_of_one_dataset_is_refused_while_the_first_runs() {
        let text = format!(
            "[[dataset]]\nname='x'\ntitle='X'\ndescription='d'\nlicense='l'\nhomepage='h'\nformat='hotpotqa'\n\
             [[dataset.file]]\nname='x.json'\nurl='http://127.0.0.1:9/x'\nsha256='{}'\n",
            "a".repeat(64)
        );
        let registry = Registry::parse(Path::new("r.toml"), &text).expect("registry");
        let home = tempfile::tempdir().expect("home");
        let dir = cache::dataset_dir(home.path(), "x");
        std::fs::create_dir_all(&dir).expect("dataset folder");
        let first = crate::lock::RunLock::acquire(&dir).expect("the first fetch's lock");
        let client = reqwest::Client::new();
        let options = FetchOptions { force: false, allow_unpinned: false, keep_downloads: false };
        let entry = registry.get("x").expect("entry");
        let err = fetch(entry, home.path(), options, &client, &|_| {}).await.map(|_| ()).expect_err("busy");
        assert!(matches!(err, EvalError::FetchBusy { .. }), "{err}");
        assert!(!dir.join("downloads").exists(), "nothing was downloaded");
        drop(first);
    }
}
