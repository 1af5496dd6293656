//! Downloads one release file to disk while hashing it, and keeps it only when it is complete and
//! matches its pinned size and sha256.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::data::registry::SourceFile;
use crate::error::{EvalError, Result};

/// A file with neither `size` nor `max_size` larger than this is refused: a server that keeps sending
/// must not fill the disk.
pub const MAX_UNSIZED_BYTES: u64 = 256 << 20;

/// The HTTP client for release downloads: redirects followed (Dropbox, Google Drive), a stalled
/// transfer given up after two minutes without data.
pub fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .user_agent(concat!("hopwise/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(30))
        .read_timeout(std::time::Duration::from_secs(120))
        .build()
        .map_err(|e| EvalError::Config(format!("cannot build the HTTP client: {e}")))
}

/// A verified download.
#[derive(Debug, Clone, PartialEq)]
pub struct Downloaded {
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
    /// Whether the sha256 was checked against a pinned value.
    pub pinned: bool,
}

/// A download error; the URL it names carries no credentials.
fn failed(file: &SourceFile, message: String) -> EvalError {
    EvalError::Download { url: hopwise_models::redact_url(&file.url), message }
}

/// Web pages served in place of a file (an expired link, a quota page) start like this.
fn looks_like_html(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&head[..head.len().min(512)]).to_ascii_lowercase();
    let text = text.trim_start();
    text.starts_with("<!doctype html") || text.starts_with("<html")
}

/// Fetches `file` into `dir/<file.name>`. The bytes go to a `.part` file first; it becomes the
/// file only after the transfer completed (every declared byte arrived) and the size and sha256
/// match the pins, and it is deleted otherwise. `progress` gets (bytes so far, expected total).
pub async fn download(
    client: &reqwest::Client,
    file: &SourceFile,
    dir: &Path,
    progress: &(dyn Fn(u64, Option<u64>) + Sync),
) -> Result<Downloaded> {
    let write_err = |path: &Path, e: std::io::Error| EvalError::Write { path: path.to_path_buf(), source: e };
    tokio::fs::create_dir_all(dir).await.map_err(|e| write_err(dir, e))?;
    let target = dir.join(&file.name);
    let part = dir.join(format!("{}.part", file.name));
    let result = transfer(client, file, &part, progress).await;
    let (bytes, sha256, head) = match result {
        Ok(done) => done,
        Err(e) => {
            let _ = tokio::fs::remove_file(&part).await;
            return Err(e);
        }
    };
    let rejection = if let Some(expected) = file.size.filter(|s| *s != bytes) {
        let hint = if looks_like_html(&head) { "; the server sent a web page instead of the file" } else { "" };
        Some(failed(file, format!("expected {expected} bytes (pinned), got {bytes}{hint}")))
    } else {
        file.sha256.as_ref().filter(|e| **e != sha256).map(|expected| EvalError::ChecksumMismatch {
            file: file.name.clone(),
            url: hopwise_models::redact_url(&file.url),
            expected: expected.clone(),
            actual: if looks_like_html(&head) {
                format!("{sha256} (a web page, not the file)")
            } else {
                sha256.clone()
            },
        })
    };
    if let Some(e) = rejection {
        let _ = tokio::fs::remove_file(&part).await;
        return Err(e);
    }
    tokio::fs::rename(&part, &target).await.map_err(|e| write_err(&target, e))?;
    Ok(Downloaded { path: target, bytes, pinned: file.sha256.is_some(), sha256 })
}

/// Streams the body into `part`; returns its length, sha256 and first bytes.
async fn transfer(
    client: &reqwest::Client,
    file: &SourceFile,
    part: &Path,
    progress: &(dyn Fn(u64, Option<u64>) + Sync),
) -> Result<(u64, String, Vec<u8>)> {
    let mut response = client.get(&file.url).send().await.map_err(|e| failed(file, format!("request failed: {e}")))?;
    if !response.status().is_success() {
        return Err(failed(file, format!("the server answered {}", response.status())));
    }
    let declared = response.content_length();
    if file.sha256.is_none() && file.size.is_none() && delimited_by_close(&response) {
        return Err(failed(
            file,
            "the server sent the file without its length (the body ends when the connection closes), so a \
             cut-off transfer cannot be told from a complete one, and the registry pins neither its size nor \
             its sha256; pin one of them in the registry to fetch it"
                .into(),
        ));
    }
    let limit = file.size.or(file.max_size).unwrap_or(MAX_UNSIZED_BYTES);
    if declared.is_some_and(|d| d > limit) {
        return Err(failed(
            file,
            format!("the server announces {} bytes, more than the {limit} expected", declared.unwrap_or(0)),
        ));
    }
    let mut out =
        tokio::fs::File::create(part).await.map_err(|e| EvalError::Write { path: part.to_path_buf(), source: e })?;
    let mut hasher = Sha256::new();
    let mut bytes = 0u64;
    let mut head = Vec::new();
    let total = file.size.or(declared);
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(e) => {
                return Err(failed(file, format!("the transfer was truncated: it broke off after {bytes} bytes ({e})")))
            }
        };
        bytes += chunk.len() as u64;
        if bytes > limit {
            return Err(failed(file, format!("the server sent more than the {limit} bytes expected")));
        }
        if head.len() < 512 {
            head.extend_from_slice(&chunk[..chunk.len().min(512 - head.len())]);
        }
        hasher.update(&chunk);
        out.write_all(&chunk).await.map_err(|e| EvalError::Write { path: part.to_path_buf(), source: e })?;
        progress(bytes, total);
    }
    out.flush().await.map_err(|e| EvalError::Write { path: part.to_path_buf(), source: e })?;
    out.sync_all().await.map_err(|e| EvalError::Write { path: part.to_path_buf(), source: e })?;
    if let Some(declared) = declared.filter(|d| *d != bytes) {
        return Err(failed(file, format!("the transfer was truncated: {bytes} of {declared} bytes arrived")));
    }
    Ok((bytes, hex::encode(hasher.finalize()), head))
}

/// Whether the body's end is only the connection's close: HTTP/1 with neither a length nor chunked
/// framing. (HTTP/2 and later frame every body.)
fn delimited_by_close(response: &reqwest::Response) -> bool {
    let chunked = response
        .headers()
        .get_all(reqwest::header::TRANSFER_ENCODING)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.to_ascii_lowercase().contains("chunked")));
    response.version() <= reqwest::Version::HTTP_11 && response.content_length().is_none() && !chunked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_a_web_page() {
        assert!(looks_like_html(b"  <!DOCTYPE html><html>quota exceeded"));
        assert!(looks_like_html(b"<html><head>"));
        assert!(!looks_like_html(b"[{\"_id\": \"5a8b\"}]"));
        assert!(!looks_like_html(b"PK\x03\x04"));
    }
}
