//! A content-addressed on-disk cache of calls, and [`CachedLlm`], the model wrapper built on it.
//!
//! Each entry is one JSON file named by the sha256 of its canonical key material, under a two-level
//! fan-out (`ab/cd/abcd….json`) so no directory grows huge. Files are written to a temporary name,
//! synced and renamed into place, so a reader (or a run killed mid-write) never sees half an entry.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use hopwise_core::{BackendErrorKind, ChatRequest, ChatResponse, Error, Llm, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Bumped when the key material or the entry layout changes, so old entries are not misread.
/// 2: keyed on the backend's identity (server address, model file) rather than its name.
const FORMAT_VERSION: u32 = 2;

/// Distinguishes temporary files of concurrent writers in one process (the pid separates processes).
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// Serve hits from disk; call the backend on a miss and store the answer.
    #[default]
    ReadWrite,
    /// Replay: serve hits only; a miss is an error and the backend is never called.
    #[serde(alias = "replay")]
    ReadOnly,
    /// Bypass the cache entirely.
    Off,
}

impl FromStr for CacheMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "read_write" | "readwrite" | "rw" | "on" => Ok(Self::ReadWrite),
            "read_only" | "readonly" | "replay" => Ok(Self::ReadOnly),
            "off" | "none" => Ok(Self::Off),
            other => Err(Error::Config(format!("unknown cache mode `{other}` (read_write, replay, off)"))),
        }
    }
}

impl fmt::Display for CacheMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ReadWrite => "read_write",
            Self::ReadOnly => "replay",
            Self::Off => "off",
        })
    }
}

/// What is stored per key: the key material (so an entry explains itself and can be checked against
/// the request) and the value.
#[derive(Serialize, Deserialize)]
struct Entry<T> {
    version: u32,
    key: String,
    material: serde_json::Value,
    value: T,
}

/// A directory of JSON entries addressed by the sha256 of canonical JSON key material.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
}

impl DiskCache {
    /// Does not touch the disk: the directory is created by the first write.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The canonical form of `material`: JSON with object keys sorted, so field order never changes a key.
    pub fn canonical(material: &impl Serialize) -> Result<serde_json::Value> {
        // serde_json's `Value` keeps objects in a sorted map (the crate's `preserve_order` is off).
        Ok(serde_json::to_value(material)?)
    }

    /// The hex sha256 of the canonical JSON of `material`.
    pub fn key(material: &serde_json::Value) -> Result<String> {
        let bytes = serde_json::to_vec(material)?;
        Ok(hex::encode(Sha256::digest(&bytes)))
    }

    /// Where the entry for `key` lives: `dir/ab/cd/<key>.json`.
    pub fn path_for(&self, key: &str) -> PathBuf {
        let (a, b) = (key.get(0..2).unwrap_or("__"), key.get(2..4).unwrap_or("__"));
        self.dir.join(a).join(b).join(format!("{key}.json"))
    }

    /// The stored value for `material`, or `None` when absent. An unreadable or mismatching entry (e.g.
    /// edited by hand) counts as absent and is logged, so a write can replace it.
    pub async fn get<T: DeserializeOwned>(&self, material: &serde_json::Value) -> Result<Option<T>> {
        let key = Self::key(material)?;
        let path = self.path_for(&key);
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))),
        };
        match serde_json::from_slice::<Entry<T>>(&bytes) {
            Ok(entry) if entry.version == FORMAT_VERSION && entry.key == key && &entry.material == material => {
                Ok(Some(entry.value))
            }
            Ok(_) => {
                tracing::warn!(path = %path.display(), "cache entry does not match its key; ignoring it");
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), "unreadable cache entry ({e}); ignoring it");
                Ok(None)
            }
        }
    }

    /// Stores `value` for `material`, atomically replacing any previous entry.
    pub async fn put<T: Serialize>(&self, material: &serde_json::Value, value: &T) -> Result<()> {
        let key = Self::key(material)?;
        let path = self.path_for(&key);
        let entry = Entry { version: FORMAT_VERSION, key: key.clone(), material: material.clone(), value };
        let mut bytes = serde_json::to_vec_pretty(&entry)?;
        bytes.push(b'\n');
        let tmp_name = format!(".{key}.{}.{}.tmp", std::process::id(), TMP_COUNTER.fetch_add(1, Ordering::Relaxed));
        tokio::task::spawn_blocking(move || write_atomically(&path, &tmp_name, &bytes))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(format!("cache writer task failed: {e}"))))?
    }
}

fn write_atomically(path: &Path, tmp_name: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let with_path =
        |e: std::io::Error, p: &Path| Error::Io(std::io::Error::new(e.kind(), format!("{}: {e}", p.display())));
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| with_path(e, parent))?;
    let tmp = parent.join(tmp_name);
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(with_path(e, path));
    }
    // Make the rename itself durable; not all platforms can sync a directory, and a lost rename only
    // costs a repeated call, so failure here is not an error.
    if let Ok(dir) = std::fs::File::open(parent) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Entries written (misses answered by the backend in read-write mode).
    pub writes: u64,
}

/// Wraps a model with the on-disk call cache. The key is the sha256 of the backend's
/// [identity](Llm::identity) (kind, server address, model, model file), an optional namespace, and the
/// full request (messages and every generation parameter, `n` and `seed` included). Errors are never
/// cached.
pub struct CachedLlm<L> {
    inner: L,
    cache: DiskCache,
    mode: CacheMode,
    namespace: String,
    hits: AtomicU64,
    misses: AtomicU64,
    writes: AtomicU64,
    /// One lock per key being computed, so concurrent identical calls (two graph nodes asking the same
    /// thing) pay for one backend call: the others wait and then hit.
    computing: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

impl<L: Llm> CachedLlm<L> {
    pub fn new(inner: L, dir: impl Into<PathBuf>, mode: CacheMode) -> Self {
        Self {
            inner,
            cache: DiskCache::new(dir),
            mode,
            namespace: String::new(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            computing: Mutex::new(HashMap::new()),
        }
    }

    fn key_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut computing = self.computing.lock().unwrap_or_else(|p| p.into_inner());
        computing.retain(|_, lock| lock.strong_count() > 0);
        if let Some(lock) = computing.get(key).and_then(Weak::upgrade) {
            return lock;
        }
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        computing.insert(key.to_string(), Arc::downgrade(&lock));
        lock
    }

    /// Adds `namespace` to every key: use it for whatever changes answers but is not in the backend name
    /// or the request (a model file's hash, a server build).
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    pub fn inner(&self) -> &L {
        &self.inner
    }

    pub fn mode(&self) -> CacheMode {
        self.mode
    }

    pub fn cache(&self) -> &DiskCache {
        &self.cache
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
        }
    }

    /// The canonical key material of a request.
    pub fn material(&self, request: &ChatRequest) -> Result<serde_json::Value> {
        DiskCache::canonical(&serde_json::json!({
            "version": FORMAT_VERSION,
            "kind": "chat",
            "backend": self.inner.identity(),
            "namespace": self.namespace,
            "request": request,
        }))
    }

    /// The cache key (hex sha256) of a request.
    pub fn key(&self, request: &ChatRequest) -> Result<String> {
        DiskCache::key(&self.material(request)?)
    }
}

#[async_trait]
impl<L: Llm> Llm for CachedLlm<L> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn identity(&self) -> String {
        self.inner.identity()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        if self.mode == CacheMode::Off {
            return self.inner.chat(request).await;
        }
        let material = self.material(request)?;
        let key = DiskCache::key(&material)?;
        let lock = self.key_lock(&key);
        let _computing = lock.lock().await;
        if let Some(response) = self.cache.get::<ChatResponse>(&material).await? {
            self.hits.fetch_add(1, Ordering::Relaxed);
            // A hit costs no model time: the stored call's timing would misreport this one.
            return Ok(ChatResponse { timing: None, ..response });
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        if self.mode == CacheMode::ReadOnly {
            return Err(Error::backend(
                self.inner.name(),
                BackendErrorKind::Unsupported,
                format!("not in cache (replay mode): key {key} under {}", self.cache.dir().display()),
            ));
        }
        let response = self.inner.chat(request).await?;
        self.cache.put(&material, &response).await?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        Ok(response)
    }
}

#[cfg(test)]
mod tests;
