//! The on-disk layout of an index directory, the BM25 schema and analyzer, and the metadata file.
//!
//! ```text
//! DIR/hopwise-index.json   metadata (schema version, passage count, chunking, per-backend sections)
//! DIR/bm25/                the tantivy index
//! ```
//! Other backends (a dense index, say) get their own sub-folder and their own key in the metadata
//! file; keys this version does not know are kept when the file is rewritten.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, STORED, STRING,
};
use tantivy::store::Compressor;
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexSettings};

use crate::chunk::ChunkOptions;
use crate::error::{IndexError, Result};
use crate::read_only::ReadOnlyAware;

/// Bumped whenever the schema or the analyzer changes in a way old indexes cannot be read with.
pub const SCHEMA_VERSION: u32 = 1;
pub const META_FILE: &str = "hopwise-index.json";
pub const BM25_SUBDIR: &str = "bm25";
const FORMAT: &str = "hopwise-index";

/// Name under which [`analyzer`] is registered with tantivy.
pub const ANALYZER_NAME: &str = "hopwise_en";
const ANALYZER_DESCRIPTION: &str =
    "simple tokenizer, drop tokens over 40 bytes, lower-case, ASCII folding, English stop words, English Snowball stemmer";

/// The analyzer for searchable text, used for both documents and queries: words split at
/// non-alphanumeric characters, lower-cased, accents folded (`Gábor` = `gabor`), English stop words
/// removed and Snowball-stemmed (`drummers` = `drummer`).
pub fn analyzer() -> TextAnalyzer {
    let builder = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter);
    match StopWordFilter::new(Language::English) {
        Some(stop_words) => builder.filter(stop_words).filter(Stemmer::new(Language::English)).build(),
        None => builder.filter(Stemmer::new(Language::English)).build(),
    }
}

/// The fields of a passage in the BM25 index.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    /// Passage id, indexed as one raw term so it can be looked up exactly.
    pub id: Field,
    /// Source document id, a raw term: re-indexing a document deletes all its old passages by it.
    pub doc_id: Field,
    pub title: Field,
    pub text: Field,
    /// Byte offsets of the passage in its document's text.
    pub start: Field,
    pub end: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let searchable = TextOptions::default().set_stored().set_indexing_options(
        TextFieldIndexing::default().set_tokenizer(ANALYZER_NAME).set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        id: builder.add_text_field("id", STRING | STORED),
        doc_id: builder.add_text_field("doc_id", STRING | STORED),
        title: builder.add_text_field("title", searchable.clone()),
        text: builder.add_text_field("text", searchable),
        start: builder.add_u64_field("start", NumericOptions::default().set_stored()),
        end: builder.add_u64_field("end", NumericOptions::default().set_stored()),
    };
    (builder.build(), fields)
}

fn fields_of(schema: &Schema) -> std::result::Result<Fields, String> {
    let get = |name: &str| schema.get_field(name).map_err(|_| format!("field `{name}` missing from the schema"));
    Ok(Fields {
        id: get("id")?,
        doc_id: get("doc_id")?,
        title: get("title")?,
        text: get("text")?,
        start: get("start")?,
        end: get("end")?,
    })
}

/// The BM25 section of the metadata file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bm25Meta {
    pub engine: String,
    pub analyzer: String,
}

/// Contents of `hopwise-index.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexMeta {
    pub format: String,
    pub schema_version: u32,
    /// Passages in the index after the last build.
    pub passages: u64,
    /// Chunking of the last build (passages of earlier builds keep theirs).
    pub chunking: ChunkOptions,
    pub bm25: Bm25Meta,
    pub updated_unix_s: u64,
    /// Sections written by other versions or backends, kept as they are.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

impl IndexMeta {
    fn new(chunking: ChunkOptions) -> Self {
        Self {
            format: FORMAT.into(),
            schema_version: SCHEMA_VERSION,
            passages: 0,
            chunking,
            bm25: Bm25Meta { engine: "tantivy 0.24".into(), analyzer: ANALYZER_DESCRIPTION.into() },
            updated_unix_s: now_unix_s(),
            other: serde_json::Map::new(),
        }
    }

    /// Reads the metadata of the index in `dir`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(META_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(IndexError::MissingIndex { dir: dir.to_path_buf() })
            }
            // Unreadable is not damaged: a permission problem is fixed with chmod, not a rebuild.
            Err(err) => return Err(IndexError::io(&path, err)),
        };
        // Read the version first so a future layout gives a version error, not a parse error.
        #[derive(Deserialize)]
        struct Version {
            schema_version: u32,
        }
        let version: Version =
            serde_json::from_slice(&bytes).map_err(|err| corrupt(dir, format!("{META_FILE}: {err}")))?;
        if version.schema_version != SCHEMA_VERSION {
            return Err(IndexError::IncompatibleIndex {
                dir: dir.to_path_buf(),
                found: version.schema_version,
                expected: SCHEMA_VERSION,
            });
        }
        serde_json::from_slice(&bytes).map_err(|err| corrupt(dir, format!("{META_FILE}: {err}")))
    }

    /// Writes the metadata atomically (temporary file, then rename).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(META_FILE);
        let tmp = dir.join(format!("{META_FILE}.tmp"));
        let json = serde_json::to_vec_pretty(self)
            .map_err(|err| IndexError::io(&path, std::io::Error::new(std::io::ErrorKind::InvalidData, err)))?;
        std::fs::write(&tmp, json).map_err(|err| IndexError::io(&tmp, err))?;
        std::fs::rename(&tmp, &path).map_err(|err| IndexError::io(&path, err))
    }
}

fn now_unix_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

pub(crate) fn corrupt(dir: &Path, reason: impl Into<String>) -> IndexError {
    IndexError::CorruptIndex { dir: dir.to_path_buf(), reason: reason.into() }
}

/// Why the search engine could not open the files in `bm25_dir`: an operating-system failure to
/// read or write them (permission denied, a read-only disk) is that failure, named with its file;
/// only the rest means the index is damaged and should be rebuilt.
pub(crate) fn open_failure(dir: &Path, bm25_dir: &Path, err: tantivy::TantivyError) -> IndexError {
    use tantivy::directory::error::{OpenDirectoryError, OpenReadError, OpenWriteError};
    use tantivy::TantivyError as E;
    let io = |source: &std::io::Error, file: &Path| {
        let path = if file.is_absolute() { file.to_path_buf() } else { bm25_dir.join(file) };
        IndexError::io(path, std::io::Error::new(source.kind(), source.to_string()))
    };
    match &err {
        E::OpenReadError(OpenReadError::IoError { io_error, filepath }) => io(io_error, filepath),
        E::OpenWriteError(OpenWriteError::IoError { io_error, filepath }) => io(io_error, filepath),
        E::OpenDirectoryError(OpenDirectoryError::IoError { io_error, directory_path }) => io(io_error, directory_path),
        E::IoError(io_error) => io(io_error, bm25_dir),
        E::LockFailure(tantivy::directory::error::LockError::IoError(io_error), _) => io(io_error, bm25_dir),
        _ => corrupt(dir, format!("{}: {err}", bm25_dir.display())),
    }
}

/// An opened BM25 index with its fields and metadata.
pub struct OpenedIndex {
    pub index: Index,
    pub fields: Fields,
    pub meta: IndexMeta,
}

/// Opens the index in `dir`, failing with a message that names the directory if it is missing or
/// unreadable.
pub fn open(dir: &Path) -> Result<OpenedIndex> {
    if !dir.is_dir() {
        return Err(IndexError::MissingIndex { dir: dir.to_path_buf() });
    }
    let meta = IndexMeta::read(dir)?;
    let bm25_dir = dir.join(BM25_SUBDIR);
    let index = ReadOnlyAware::open(&bm25_dir)
        .map_err(tantivy::TantivyError::from)
        .and_then(Index::open)
        .map_err(|err| open_failure(dir, &bm25_dir, err))?;
    let fields = fields_of(&index.schema()).map_err(|reason| corrupt(dir, reason))?;
    index.tokenizers().register(ANALYZER_NAME, analyzer());
    Ok(OpenedIndex { index, fields, meta })
}

/// Opens the index in `dir`, or creates an empty one (with its metadata) if `dir` is missing or empty.
/// Refuses a non-empty directory that is not a hopwise index, so a typo cannot clobber other files.
pub fn open_or_create(dir: &Path, chunking: ChunkOptions) -> Result<OpenedIndex> {
    if dir.join(META_FILE).exists() {
        return open(dir);
    }
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(|err| IndexError::io(dir, err))?;
        if !dir.is_dir() || entries.next().is_some() {
            return Err(IndexError::NotAnIndexDir { dir: dir.to_path_buf() });
        }
    }
    let bm25_dir: PathBuf = dir.join(BM25_SUBDIR);
    std::fs::create_dir_all(&bm25_dir).map_err(|err| IndexError::io(&bm25_dir, err))?;
    let (schema, fields) = schema();
    // Passages are stored uncompressed: every search loads its top k, so decompression sits on the
    // query path, while disk is cheap. Indexes built before keep their own setting, which tantivy
    // reads from the index.
    let settings = IndexSettings { docstore_compression: Compressor::None, ..IndexSettings::default() };
    let index = Index::builder().schema(schema).settings(settings).create_in_dir(&bm25_dir)?;
    index.tokenizers().register(ANALYZER_NAME, analyzer());
    let meta = IndexMeta::new(chunking);
    meta.write(dir)?;
    Ok(OpenedIndex { index, fields, meta })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file the operating system will not let us read or lock is named with its error; only a
    /// damaged index is called unreadable and sent to be rebuilt.
    #[test]
    fn permission_and_lock_failures_are_io_errors_not_corruption() {
        use std::sync::Arc;
        use tantivy::directory::error::{LockError, OpenReadError};
        let (dir, bm25) = (Path::new("/idx"), Path::new("/idx/bm25"));
        let denied = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let read = tantivy::TantivyError::OpenReadError(OpenReadError::wrap_io_error(denied(), ".managed.json".into()));
        let message = open_failure(dir, bm25, read).to_string();
        assert!(message.starts_with("/idx/bm25/.managed.json: ") && !message.contains("rebuild"), "{message}");
        assert!(!message.contains("IoError {"), "no debug dump: {message}");
        let lock = tantivy::TantivyError::LockFailure(LockError::IoError(Arc::new(denied())), None);
        let message = open_failure(dir, bm25, lock).to_string();
        assert!(message.starts_with("/idx/bm25: ") && !message.contains("Lockfile"), "{message}");
        let damaged = tantivy::TantivyError::SchemaError("no field".into());
        assert!(matches!(open_failure(dir, bm25, damaged), IndexError::CorruptIndex { .. }));
    }

    fn tokens(text: &str) -> Vec<String> {
        let mut analyzer = analyzer();
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    #[test]
    fn analyzer_folds_stems_and_drops_stop_words() {
        assert_eq!(tokens("The Drummers of Pál Gábor"), ["drummer", "pal", "gabor"]);
    }

    #[test]
    fn unknown_metadata_keys_survive_a_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut meta = IndexMeta::new(ChunkOptions::default());
        meta.other.insert("dense".into(), serde_json::json!({"model": "m"}));
        meta.write(dir.path()).expect("write");
        let back = IndexMeta::read(dir.path()).expect("read");
        assert_eq!(back, meta);
    }

    /// Metadata that cannot be read is an I/O error naming the file, not a damaged index to rebuild.
    #[test]
    fn unreadable_metadata_is_not_called_damaged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = dir.path().join(META_FILE);
        std::fs::create_dir(&meta).expect("a directory where the file should be");
        let err = IndexMeta::read(dir.path()).expect_err("unreadable");
        assert!(matches!(err, IndexError::Io { .. }) && !err.to_string().contains("rebuild"), "{err}");
        std::fs::remove_dir(&meta).expect("remove");

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            IndexMeta::new(ChunkOptions::default()).write(dir.path()).expect("write");
            std::fs::set_permissions(&meta, std::fs::Permissions::from_mode(0o000)).expect("chmod");
            // Root reads it anyway; the permission case is then not testable here.
            if std::fs::read(&meta).is_err() {
                let err = IndexMeta::read(dir.path()).expect_err("permission denied");
                assert!(err.to_string().contains("ermission denied") && !err.to_string().contains("rebuild"), "{err}");
            }
        }
    }
}
