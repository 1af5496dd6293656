//! The committed results recompute: every record under the repository's `results/` (archived rows
//! included) is re-scored from its prediction and gold answers, with no model, and must carry the
//! metrics the scorer gives today; a row holds each question once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use hopwise_eval::dataset::Task;
use hopwise_eval::metrics::{label_accuracy, score_answer};
use hopwise_eval::read_results;

fn results_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            results_files(&path, out);
        } else if path.file_name().is_some_and(|n| n == "results.jsonl") {
            out.push(path);
        }
    }
}

#[test]
fn every_committed_record_rescores_to_its_stored_metrics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results");
    let mut files = Vec::new();
    results_files(&root, &mut files);
    assert!(!files.is_empty(), "no results.jsonl under {}", root.display());
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    let mut checked = 0;
    for file in &files {
        let (records, _) = read_results(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut seen = HashSet::new();
        for r in &records {
            let at = format!("{}: {} {}", file.display(), r.id, r.strategy);
            assert!(seen.insert((&r.dataset, &r.id, &r.strategy)), "{at}: recorded twice");
            assert!(!r.gold.is_empty(), "{at}: no gold answer");
            let s = score_answer(&r.prediction, &r.gold);
            let m = &r.metrics;
            assert!(
                close(m.em, s.em) && close(m.cover_em, s.cover_em) && close(m.f1, s.f1),
                "{at}: stored {m:?}, today {s:?}"
            );
            let label = (r.task == Task::FactCheck).then(|| label_accuracy(&r.prediction, &r.gold[0]));
            assert_eq!(m.label_accuracy.is_some(), label.is_some(), "{at}");
            assert!(close(m.accuracy, label.unwrap_or(s.cover_em)), "{at}: accuracy {}", m.accuracy);
            checked += 1;
        }
    }
    assert!(checked > 1000, "only {checked} records were found under {}", root.display());
}
