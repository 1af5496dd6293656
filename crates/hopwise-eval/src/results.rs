//! `results.jsonl`: one line per example × strategy, appended and fsync'd one at a time, so a run
//! killed at any moment loses at most the line being written. On open, a trailing partial line is cut
//! off (the file is truncated to its last complete line) and the finished keys are returned so the
//! runner skips them.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use hopwise_core::Stats;
use serde::{Deserialize, Serialize};

use crate::dataset::Task;
use crate::error::{EvalError, Result};
use crate::metrics::RetrievalScores;

/// The scores of one prediction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordMetrics {
    /// The headline number: cover-EM for QA, label accuracy for fact checking.
    pub accuracy: f64,
    pub cover_em: f64,
    pub em: f64,
    pub f1: f64,
    pub rouge_l: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_accuracy: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    pub dataset: String,
    pub id: String,
    pub strategy: String,
    pub question: String,
    #[serde(default)]
    pub qtype: Option<String>,
    #[serde(default)]
    pub task: Task,
    pub prediction: String,
    pub gold: Vec<String>,
    pub metrics: RecordMetrics,
    /// The confidence the strategy gave its answer, when it gives one (HGOT, ToQD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Retrieval quality of the passages the strategy used, when it retrieved and gold evidence is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<RetrievalScores>,
    pub stats: Stats,
    /// Wall time for this example × strategy, including waiting for backends.
    pub seconds: f64,
    #[serde(default)]
    pub best_effort: bool,
    /// Why the strategy produced no answer, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The trace file, relative to the output directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// Identifies one unit of work: (dataset, example id, strategy).
pub type RecordKey = (String, String, String);

impl ResultRecord {
    pub fn key(&self) -> RecordKey {
        (self.dataset.clone(), self.id.clone(), self.strategy.clone())
    }
}

/// The file operations the log needs; a seam so tests can make writes fail like a full disk.
pub trait LogFile: Send {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    fn sync(&mut self) -> std::io::Result<()>;
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
}

impl LogFile for File {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        Write::write_all(self, bytes)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.sync_data()
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.set_len(len)?;
        self.sync_data()
    }
}

pub struct ResultsLog<F: LogFile = File> {
    path: PathBuf,
    file: F,
    /// Bytes of complete lines in the file.
    len: u64,
}

/// Reads the complete lines of a results file. Returns the records and the byte length of the complete
/// part. A trailing line without its newline is a partial write and is ignored; a complete line that
/// does not parse is an error naming its line.
pub fn read_results(path: &Path) -> Result<(Vec<ResultRecord>, u64)> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(EvalError::Read { path: path.to_path_buf(), source: e }),
    };
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut records = Vec::new();
    for (i, line) in bytes[..complete].split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let record = serde_json::from_slice::<ResultRecord>(line).map_err(|e| EvalError::CorruptResults {
            path: path.to_path_buf(),
            line: i + 1,
            message: e.to_string(),
        })?;
        records.push(record);
    }
    Ok((records, complete as u64))
}

impl ResultsLog<File> {
    /// Opens (or creates) the log for appending, cutting off a partial last line. Returns the records
    /// already finished.
    pub fn open(path: &Path) -> Result<(Self, Vec<ResultRecord>)> {
        let (records, complete) = read_results(path)?;
        let write_err = |e| EvalError::ResultsWrite { path: path.to_path_buf(), source: e };
        let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(write_err)?;
        let on_disk = file.metadata().map_err(write_err)?.len();
        if on_disk > complete {
            LogFile::truncate(&mut file, complete).map_err(write_err)?;
        }
        Ok((Self { path: path.to_path_buf(), file, len: complete }, records))
    }
}

impl<F: LogFile> ResultsLog<F> {
    pub fn with_file(path: PathBuf, file: F, len: u64) -> Self {
        Self { path, file, len }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as one line and fsyncs it. If the write fails (disk full, I/O error) the
    /// file is cut back to its last complete line and the error is returned: the caller stops.
    pub fn append(&mut self, record: &ResultRecord) -> Result<()> {
        let mut line = serde_json::to_vec(record)
            .map_err(|e| EvalError::ResultsWrite { path: self.path.clone(), source: std::io::Error::other(e) })?;
        line.push(b'\n');
        let result = self.file.write_all(&line).and_then(|()| self.file.sync());
        match result {
            Ok(()) => {
                self.len += line.len() as u64;
                Ok(())
            }
            Err(e) => {
                // Best effort: a partial line left behind is also dropped by the next `open`.
                let _ = self.file.truncate(self.len);
                Err(EvalError::ResultsWrite { path: self.path.clone(), source: e })
            }
        }
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so readers never see half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let err = |e| EvalError::ResultsWrite { path: path.to_path_buf(), source: e };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    let tmp = path.with_extension(format!("{}.tmp", path.extension().and_then(|e| e.to_str()).unwrap_or("")));
    {
        let mut f = File::create(&tmp).map_err(err)?;
        Write::write_all(&mut f, bytes).map_err(err)?;
        f.sync_data().map_err(err)?;
    }
    std::fs::rename(&tmp, path).map_err(err)
}

/// A record with the given scores, for the unit tests of the aggregating modules.
#[cfg(test)]
pub(crate) fn scored_record(dataset: &str, id: &str, strategy: &str, accuracy: f64, f1: f64) -> ResultRecord {
    ResultRecord {
        dataset: dataset.into(),
        id: id.into(),
        strategy: strategy.into(),
        question: "q".into(),
        qtype: None,
        task: Task::Qa,
        prediction: "p".into(),
        gold: vec!["g".into()],
        metrics: RecordMetrics { accuracy, cover_em: accuracy, em: accuracy, f1, rouge_l: 0.0, label_accuracy: None },
        confidence: None,
        retrieval: None,
        stats: Stats::default(),
        seconds: 1.0,
        best_effort: false,
        error: None,
        trace: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn record(id: &str, strategy: &str) -> ResultRecord {
        ResultRecord {
            dataset: "d".into(),
            id: id.into(),
            strategy: strategy.into(),
            question: "q?".into(),
            qtype: None,
            task: Task::Qa,
            prediction: "p".into(),
            gold: vec!["g".into()],
            metrics: RecordMetrics::default(),
            confidence: None,
            retrieval: None,
            stats: Stats::default(),
            seconds: 0.5,
            best_effort: false,
            error: None,
            trace: None,
        }
    }

    #[test]
    fn partial_last_line_is_cut_on_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.jsonl");
        {
            let (mut log, done) = ResultsLog::open(&path).expect("open");
            assert!(done.is_empty());
            log.append(&record("1", "cot")).expect("append");
            log.append(&record("2", "cot")).expect("append");
        }
        let full = std::fs::read(&path).expect("read");
        let mut torn = full.clone();
        torn.extend_from_slice(b"{\"dataset\":\"d\",\"id\":\"3\",\"stra");
        std::fs::write(&path, &torn).expect("write torn");
        let (mut log, done) = ResultsLog::open(&path).expect("reopen");
        assert_eq!(done.len(), 2);
        assert_eq!(std::fs::read(&path).expect("read"), full, "truncated to the last complete line");
        log.append(&record("3", "cot")).expect("append");
        let (all, _) = read_results(&path).expect("read");
        assert_eq!(all.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec!["1", "2", "3"]);
    }

    #[test]
    fn a_corrupt_complete_line_is_reported_with_its_number() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.jsonl");
        let good = serde_json::to_string(&record("1", "cot")).expect("json");
        std::fs::write(&path, format!("{good}\nnot json\n")).expect("write");
        let err = ResultsLog::open(&path).err().expect("corrupt");
        assert!(err.to_string().contains("results.jsonl:2"), "{err}");
    }

    /// Accepts `room` bytes, then fails like a full disk (after writing what fit).
    struct FullDisk {
        data: Vec<u8>,
        room: usize,
    }

    impl LogFile for FullDisk {
        fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            let fit = bytes.len().min(self.room - self.data.len().min(self.room));
            self.data.extend_from_slice(&bytes[..fit]);
            if fit < bytes.len() {
                return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device"));
            }
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn truncate(&mut self, len: u64) -> std::io::Result<()> {
            self.data.truncate(len as usize);
            Ok(())
        }
    }

    #[test]
    fn a_full_disk_stops_with_a_clear_error_and_keeps_complete_lines() {
        let one = serde_json::to_vec(&record("1", "cot")).expect("json").len() + 1;
        let disk = FullDisk { data: Vec::new(), room: one + one / 2 };
        let mut log = ResultsLog::with_file(PathBuf::from("out/results.jsonl"), disk, 0);
        log.append(&record("1", "cot")).expect("first fits");
        let err = log.append(&record("2", "cot")).expect_err("second does not fit");
        assert!(err.to_string().contains("the disk is full"), "{err}");
        assert_eq!(log.file.data.len(), one, "the partial second line was cut off");
        assert_eq!(log.file.data.last(), Some(&b'\n'));
    }
}
