//! Where fetched datasets live (`$HOPWISE_HOME/data/<name>/`), what a finished fetch leaves there,
//! and how a bare `--dataset NAME` finds its file.
//!
//! A finished fetch leaves `<name>.jsonl`, `<name>_corpus.jsonl` (when the release has paragraphs)
//! and `source.json`, written last: without it the folder is an unfinished fetch.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::data::registry::Registry;
use crate::error::{EvalError, Result};

pub const MANIFEST: &str = "source.json";

/// One fetched file, as verified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FetchedFile {
    pub name: String,
    pub url: String,
    pub bytes: u64,
    pub sha256: String,
    /// Whether the sha256 matched a pinned value (false: recorded, not checked).
    pub pinned: bool,
}

/// `source.json`: what was fetched, from where, under which license, and what it became.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub name: String,
    pub title: String,
    pub license: String,
    pub homepage: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub fetched_at: String,
    pub files: Vec<FetchedFile>,
    pub questions: usize,
    pub passages: usize,
}

/// The data directory of the cache.
pub fn data_root(home: &Path) -> PathBuf {
    home.join("data")
}

pub fn dataset_dir(home: &Path, name: &str) -> PathBuf {
    data_root(home).join(name)
}

pub fn questions_file(home: &Path, name: &str) -> PathBuf {
    dataset_dir(home, name).join(format!("{name}.jsonl"))
}

pub fn corpus_file(home: &Path, name: &str) -> PathBuf {
    dataset_dir(home, name).join(format!("{name}_corpus.jsonl"))
}

/// The manifest of a finished fetch, if there is one.
pub fn manifest(home: &Path, name: &str) -> Option<Manifest> {
    let bytes = std::fs::read(dataset_dir(home, name).join(MANIFEST)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A bare name: no path separator and no extension, e.g. `hotpotqa` or `2wiki`.
fn is_bare_name(arg: &Path) -> bool {
    let text = arg.to_string_lossy();
    !text.is_empty() && !text.contains(['/', '\\']) && arg.extension().is_none()
}

/// Resolves a `--dataset` argument. A path to an existing file is used as is. A bare name is looked
/// up, in order: `<data_dir>/<name>.jsonl` (the evaluation data directory in `HOPWISE_DATA`), then
/// the fetched copy in the cache; registry aliases (`2wiki`) resolve to their dataset's name. Any
/// other argument is returned unchanged, for the loader to report.
pub fn resolve_dataset(arg: &Path, home: &Path, data_dir: Option<&Path>, registry: &Registry) -> Result<PathBuf> {
    if arg.is_file() || !is_bare_name(arg) {
        return Ok(arg.to_path_buf());
    }
    let given = arg.to_string_lossy().to_string();
    let entry = registry.find(&given);
    let name = entry.map_or_else(|| given.clone(), |e| e.name.clone());
    if let Some(candidate) = data_dir.map(|d| d.join(format!("{name}.jsonl"))).filter(|p| p.is_file()) {
        return Ok(candidate);
    }
    let cached = questions_file(home, &name);
    if cached.is_file() && manifest(home, &name).is_some() {
        return Ok(cached);
    }
    let in_data_dir =
        data_dir.map(|d| format!(" or put {name}.jsonl in {} (HOPWISE_DATA)", d.display())).unwrap_or_default();
    Err(EvalError::UnknownDataset(match entry {
        Some(_) => format!("dataset `{given}` is not fetched yet: run `hopwise data fetch {name}`{in_data_dir}"),
        None => {
            let known: Vec<&str> = registry.datasets.iter().map(|e| e.name.as_str()).collect();
            format!(
                "no dataset file `{given}` and no dataset of that name (known: {}); give a file path{in_data_dir}",
                known.join(", ")
            )
        }
    }))
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch (proleptic Gregorian calendar).
pub fn utc_timestamp(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let secs = unix_seconds % 86_400;
    // Days since 1970-01-01 to a civil date (the standard era-based conversion).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs % 3600 / 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_timestamp(1_795_500_000), "2026-11-24T06:00:00Z");
    }

    #[test]
    fn names_resolve_through_the_data_dir_then_the_cache() {
        let registry = Registry::built_in().expect("registry");
        let home = tempfile::tempdir().expect("home");
        let data = tempfile::tempdir().expect("data");
        let h = home.path();

        let err = resolve_dataset(Path::new("2wiki"), h, None, &registry).expect_err("not fetched");
        assert!(err.to_string().contains("hopwise data fetch 2wikimultihopqa"), "{err}");
        let err = resolve_dataset(Path::new("squad"), h, Some(data.path()), &registry).expect_err("unknown");
        assert!(err.to_string().contains("known: hotpotqa") && err.to_string().contains("HOPWISE_DATA"), "{err}");

        // A fetched copy is found only once its manifest says the fetch finished.
        std::fs::create_dir_all(dataset_dir(h, "2wikimultihopqa")).expect("mkdir");
        std::fs::write(questions_file(h, "2wikimultihopqa"), "{}\n").expect("write");
        assert!(resolve_dataset(Path::new("2wiki"), h, None, &registry).is_err(), "unfinished fetch");
        std::fs::write(dataset_dir(h, "2wikimultihopqa").join(MANIFEST), "{\"name\":\"2wikimultihopqa\",\"title\":\"t\",\"license\":\"l\",\"homepage\":\"h\",\"fetched_at\":\"x\",\"files\":[],\"questions\":1,\"passages\":0}").expect("manifest");
        assert_eq!(
            resolve_dataset(Path::new("2wiki"), h, None, &registry).expect("cached"),
            questions_file(h, "2wikimultihopqa")
        );

        // The evaluation data directory wins, and knows names the registry does not.
        std::fs::write(data.path().join("2wikimultihopqa.jsonl"), "{}\n").expect("write");
        std::fs::write(data.path().join("fever.jsonl"), "{}\n").expect("write");
        let d = Some(data.path());
        assert_eq!(
            resolve_dataset(Path::new("2wiki"), h, d, &registry).expect("data dir"),
            data.path().join("2wikimultihopqa.jsonl")
        );
        assert_eq!(
            resolve_dataset(Path::new("fever"), h, d, &registry).expect("unregistered"),
            data.path().join("fever.jsonl")
        );

        // Paths are paths.
        let file = data.path().join("fever.jsonl");
        assert_eq!(resolve_dataset(&file, h, None, &registry).expect("path"), file);
        assert_eq!(
            resolve_dataset(Path::new("missing/x.jsonl"), h, None, &registry).expect("as is"),
            Path::new("missing/x.jsonl")
        );
    }
}
