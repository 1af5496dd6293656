//! The registry of fetchable datasets: the built-in `registry.toml`, or a file given by the user
//! (a mirror, a private copy, or a test server).

use std::path::Path;

use serde::Deserialize;

use crate::error::{EvalError, Result};

/// The built-in registry, compiled into the binary.
pub const BUILT_IN: &str = include_str!("registry.toml");

/// One file of a release.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceFile {
    /// The name it is saved under (converters look files up by it).
    pub name: String,
    pub url: String,
    /// Expected length in bytes, where known.
    #[serde(default)]
    pub size: Option<u64>,
    /// Where the exact length is not known: the most bytes accepted before the transfer is refused
    /// (default [`crate::data::download::MAX_UNSIZED_BYTES`]).
    #[serde(default)]
    pub max_size: Option<u64>,
    /// Pinned lowercase hex sha256; a file without one is fetched only when the user allows it.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Where the pinned checksum was published.
    #[serde(default)]
    pub checksum_source: Option<String>,
    /// Why there is no pinned checksum.
    #[serde(default)]
    pub unpinned: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub title: String,
    pub description: String,
    pub license: String,
    pub homepage: String,
    /// The converter: hotpotqa, 2wikimultihopqa, musique, multihop_rag, strategyqa, bamboogle.
    pub format: String,
    #[serde(rename = "file")]
    pub files: Vec<SourceFile>,
}

impl Entry {
    pub fn is_pinned(&self) -> bool {
        self.files.iter().all(|f| f.sha256.is_some())
    }

    fn answers_to(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        self.name == name || self.aliases.contains(&name)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    #[serde(rename = "dataset")]
    pub datasets: Vec<Entry>,
}

/// A dataset name is one path component: lowercase letters, digits, `-` and `_`, not starting with
/// a separator, so every file written under its name stays inside the data folder.
pub fn is_plain_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
}

impl Registry {
    /// Parses a registry; `origin` names it in errors. Checksums must be 64 hex digits.
    pub fn parse(origin: &Path, text: &str) -> Result<Self> {
        let bad = |message: String| EvalError::Report { path: origin.to_path_buf(), message };
        let registry: Registry = toml::from_str(text).map_err(|e| bad(format!("not a dataset registry: {e}")))?;
        for entry in &registry.datasets {
            for name in std::iter::once(&entry.name).chain(&entry.aliases) {
                if !is_plain_name(name) {
                    return Err(bad(format!(
                        "dataset name `{name}`: a name is 1 to 64 of a-z, 0-9, `-` and `_`, starting with a letter or digit"
                    )));
                }
            }
            if entry.files.is_empty() {
                return Err(bad(format!("dataset `{}` lists no file", entry.name)));
            }
            for f in &entry.files {
                let hex_ok =
                    |h: &String| h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
                if f.sha256.as_ref().is_some_and(|h| !hex_ok(h)) {
                    return Err(bad(format!("{}/{}: sha256 must be 64 lowercase hex digits", entry.name, f.name)));
                }
                if f.name.contains(['/', '\\']) || f.name.starts_with('.') || f.name.is_empty() {
                    return Err(bad(format!("{}: `{}` is not a plain file name", entry.name, f.name)));
                }
            }
        }
        Ok(registry)
    }

    pub fn built_in() -> Result<Self> {
        Self::parse(Path::new("<built-in registry>"), BUILT_IN)
    }

    /// The built-in registry, or the file at `path`.
    pub fn load(path: Option<&Path>) -> Result<Self> {
        match path {
            None => Self::built_in(),
            Some(p) => {
                let text =
                    std::fs::read_to_string(p).map_err(|e| EvalError::Read { path: p.to_path_buf(), source: e })?;
                Self::parse(p, &text)
            }
        }
    }

    /// The entry called `name` or one of its aliases (case-insensitive).
    pub fn find(&self, name: &str) -> Option<&Entry> {
        self.datasets.iter().find(|e| e.answers_to(name))
    }

    /// The entry or an error listing the names there are.
    pub fn get(&self, name: &str) -> Result<&Entry> {
        self.find(name).ok_or_else(|| {
            let known: Vec<&str> = self.datasets.iter().map(|e| e.name.as_str()).collect();
            EvalError::UnknownDataset(format!("unknown dataset `{name}`; known: {}", known.join(", ")))
        })
    }
}

/// The human name of a dataset (`2wikimultihopqa` -> `2WikiMultiHopQA`); the name itself when the
/// built-in registry does not know it.
pub fn display_name(name: &str) -> String {
    Registry::built_in().ok().and_then(|r| r.find(name).map(|e| e.title.clone())).unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_registry_parses_and_names_every_required_dataset() {
        let r = Registry::built_in().expect("built-in registry");
        for name in ["hotpotqa", "2wiki", "2wikimultihopqa", "musique", "multihop-rag", "strategyqa", "bamboogle"] {
            assert!(r.find(name).is_some(), "{name}");
        }
        assert_eq!(r.get("2WIKI").expect("alias").name, "2wikimultihopqa");
        for e in &r.datasets {
            for f in &e.files {
                assert!(f.sha256.is_some() != f.unpinned.is_some(), "{}/{}: pinned xor says why not", e.name, f.name);
                assert!(f.size.is_some() || f.max_size.is_some(), "{}/{}: a bound on its size", e.name, f.name);
                assert!(
                    f.sha256.is_none() || f.checksum_source.is_some(),
                    "{}/{}: where the checksum is from",
                    e.name,
                    f.name
                );
            }
        }
        assert!(r.get("hotpotqa").expect("h").is_pinned() && !r.get("bamboogle").expect("b").is_pinned());
        assert!(r.get("squad").expect_err("unknown").to_string().contains("known: hotpotqa"));
        assert_eq!(display_name("2wikimultihopqa"), "2WikiMultiHopQA");
        assert_eq!(display_name("mystery"), "mystery");
    }

    #[test]
    fn bad_checksums_and_file_names_are_refused() {
        let entry = |sha: &str, file: &str| {
            format!(
                "[[dataset]]\nname='x'\ntitle='X'\ndescription='d'\nlicense='l'\nhomepage='h'\nformat='hotpotqa'\n\
                 [[dataset.file]]\nname='{file}'\nurl='http://127.0.0.1/x'\nsha256='{sha}'\n"
            )
        };
        let p = Path::new("r.toml");
        assert!(Registry::parse(p, &entry(&"a".repeat(64), "x.json")).is_ok());
        assert!(Registry::parse(p, &entry("abc", "x.json")).is_err());
        assert!(Registry::parse(p, &entry(&"A".repeat(64), "x.json")).is_err());
        assert!(Registry::parse(p, &entry(&"a".repeat(64), "../x.json")).is_err());
        assert!(Registry::parse(p, "[[dataset]]\nname='x'\n").is_err());
    }

    #[test]
    fn dataset_names_cannot_leave_the_data_folder() {
        let entry = |name: &str| {
            format!(
                "[[dataset]]\nname='{name}'\ntitle='X'\ndescription='d'\nlicense='l'\nhomepage='h'\nformat='hotpotqa'\n\
                 [[dataset.file]]\nname='x.json'\nurl='http://127.0.0.1/x'\nsha256='{}'\n",
                "a".repeat(64)
            )
        };
        let p = Path::new("r.toml");
        assert!(Registry::parse(p, &entry("my-set_2")).is_ok());
        for bad in ["../../escape-test", "/tmp/abs", "a/b", ".hidden", "", "UPPER", "a b", "-x"] {
            let err = Registry::parse(p, &entry(bad)).expect_err(bad);
            assert!(err.to_string().contains("dataset name"), "{bad}: {err}");
        }
    }
}
