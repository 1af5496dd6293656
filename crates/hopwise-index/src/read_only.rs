//! A tantivy directory that can be searched where it cannot be written: a read-only mount, an
//! index owned by another user. Tantivy takes its meta lock (`.tantivy-meta.lock`) before reading
//! the segment list, by opening that file for writing; where that is refused, a shared lock is taken
//! on the existing file opened for reading (an advisory lock needs no write access, so a writer with
//! access still waits for readers and the other way round), and without the file, readers go on
//! unlocked: nobody can be writing where the lock file cannot be created. Every other lock, the writer's
//! above all, is left to fail as before.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::directory::error::{DeleteError, LockError, OpenDirectoryError, OpenReadError, OpenWriteError};
use tantivy::directory::META_LOCK;
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, WatchCallback, WatchHandle, WritePtr,
};

#[derive(Debug, Clone)]
pub(crate) struct ReadOnlyAware<D: Directory + Clone> {
    inner: D,
    root: PathBuf,
}

impl ReadOnlyAware<MmapDirectory> {
    pub(crate) fn open(root: &Path) -> Result<Self, OpenDirectoryError> {
        Ok(Self { inner: MmapDirectory::open(root)?, root: root.to_path_buf() })
    }
}

impl<D: Directory + Clone> ReadOnlyAware<D> {
    #[cfg(test)]
    fn wrap(inner: D, root: &Path) -> Self {
        Self { inner, root: root.to_path_buf() }
    }
}

/// Write access refused, as opposed to any other failure.
fn refused(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem)
}

/// The meta lock without write access: a shared lock on the existing lock file, or none.
fn read_only_meta_lock(path: &Path) -> Result<DirectoryLock, LockError> {
    match File::open(path) {
        Ok(file) => {
            file.lock_shared().map_err(LockError::wrap_io_error)?;
            Ok(DirectoryLock::from(Box::new(file)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(DirectoryLock::from(Box::new(()))),
        Err(e) => Err(LockError::wrap_io_error(e)),
    }
}

impl<D: Directory + Clone> Directory for ReadOnlyAware<D> {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.inner.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.inner.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.inner.atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.inner.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        match self.inner.acquire_lock(lock) {
            Err(LockError::IoError(error)) if lock.filepath == META_LOCK.filepath && refused(&error) => {
                read_only_meta_lock(&self.root.join(&lock.filepath))
            }
            other => other,
        }
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(watch_callback)
    }
}

#[cfg(test)]
mod tests {
    use tantivy::directory::{RamDirectory, INDEX_WRITER_LOCK};

    use super::*;

    /// A directory whose every lock is refused the way a read-only mount refuses it.
    #[derive(Debug, Clone, Default)]
    struct Refusing(RamDirectory);

    impl Directory for Refusing {
        fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
            self.0.get_file_handle(path)
        }
        fn delete(&self, path: &Path) -> Result<(), DeleteError> {
            self.0.delete(path)
        }
        fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
            self.0.exists(path)
        }
        fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
            self.0.open_write(path)
        }
        fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
            self.0.atomic_read(path)
        }
        fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
            self.0.atomic_write(path, data)
        }
        fn sync_directory(&self) -> io::Result<()> {
            Ok(())
        }
        fn acquire_lock(&self, _: &Lock) -> Result<DirectoryLock, LockError> {
            Err(LockError::wrap_io_error(io::Error::from(io::ErrorKind::ReadOnlyFilesystem)))
        }
        fn watch(&self, callback: WatchCallback) -> tantivy::Result<WatchHandle> {
            self.0.watch(callback)
        }
    }

    #[test]
    fn a_refused_meta_lock_reads_on_and_a_refused_writer_lock_still_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let directory = ReadOnlyAware::wrap(Refusing::default(), dir.path());
        // No lock file: nobody who could write holds it.
        directory.acquire_lock(&META_LOCK).expect("readers go on without the file");
        // An existing lock file: held through a read-only handle.
        std::fs::write(dir.path().join(&META_LOCK.filepath), b"").expect("lock file");
        let held = directory.acquire_lock(&META_LOCK).expect("a shared lock on the existing file");
        let file = File::open(dir.path().join(&META_LOCK.filepath)).expect("open");
        assert!(file.try_lock().is_err(), "a writer's exclusive lock waits while a reader holds it");
        drop(held);
        file.try_lock().expect("released with the reader's lock");
        let refused = directory.acquire_lock(&INDEX_WRITER_LOCK);
        assert!(
            matches!(refused, Err(LockError::IoError(ref e)) if e.kind() == io::ErrorKind::ReadOnlyFilesystem),
            "writing stays refused"
        );
    }
}
