//! One writer per output directory. Two runs appending to one `results.jsonl` would each run the
//! jobs the other has not finished yet and write them twice; the second run is refused instead.
//! The lock is an advisory lock (`flock`) on `run.lock`, which the operating system releases when
//! the process ends however it ends, so a killed run never leaves a stale lock behind.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use fs4::FileExt;

use crate::error::{EvalError, Result};

pub const LOCK_FILE: &str = "run.lock";

/// Held for as long as a run writes to its directory; released on drop.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    path: PathBuf,
}

impl RunLock {
    /// Takes the lock of `out_dir` (which must exist), or fails at once if another run holds it.
    pub fn acquire(out_dir: &Path) -> Result<Self> {
        let path = out_dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| EvalError::Write { path: path.clone(), source: e })?;
        match file.try_lock_exclusive() {
            Ok(()) => Ok(Self { _file: file, path }),
            Err(e) if e.kind() == fs4::lock_contended_error().kind() => {
                Err(EvalError::Busy { out_dir: out_dir.to_path_buf() })
            }
            Err(e) => Err(EvalError::Write { path, source: e }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_until_the_first_is_done() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = RunLock::acquire(dir.path()).expect("free");
        let err = RunLock::acquire(dir.path()).expect_err("held");
        assert!(matches!(err, EvalError::Busy { .. }), "{err}");
        assert!(err.to_string().contains("another"), "{err}");
        drop(first);
        RunLock::acquire(dir.path()).expect("released on drop");
    }
}
