//! The results tooling end to end: `hopwise eval` (real binary, real HTTP model server with scripted
//! replies, each question's own paragraphs as the retriever) writes summary.md with intervals and
//! the paired comparison with rtr; `hopwise report` turns a results/ tree of such runs into the
//! EVALUATION.md section and cost plots without touching hand-written text; and the section
//! committed in this repository is exactly what the report makes from the committed results/.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hopwise_models::testing::MockOpenAiServer;
use serde_json::{json, Value};

mod common;

fn paragraph(title: &str, text: &str) -> Value {
    json!({"title": title, "text": text, "supporting": true})
}

/// Four questions built so that, against rtr, direct wins one, ties one and loses two.
fn dataset() -> String {
    questions().iter().map(|r| r.to_string() + "\n").collect()
}

fn questions() -> [Value; 4] {
    [
        json!({"id": "q1", "question": "Is Ada Vance a composer?", "answers": ["yes"], "type": "comparison",
               "paragraphs": [paragraph("Ada Vance", "Ada Vance is a composer."), paragraph("Moss", "Moss grows on stones.")]}),
        json!({"id": "q2", "question": "Which lake lies beside Port Ellis?", "answers": ["Tidewater"], "type": "bridge",
               "paragraphs": [paragraph("Tidewater", "Tidewater is the lake beside Port Ellis."), paragraph("Moss", "Moss grows on stones.")]}),
        json!({"id": "q3", "question": "Who painted the Harbour Mural?", "answers": ["Bo Lind"], "type": "bridge",
               "paragraphs": [paragraph("Harbour Mural", "The Harbour Mural was painted in 1950."), paragraph("Moss", "Moss grows on stones.")]}),
        json!({"id": "q4", "question": "Which river crosses Hale?", "answers": ["Orme River"], "type": "bridge",
               "paragraphs": [paragraph("Orme River", "The Orme River crosses Hale."), paragraph("Moss", "Moss grows on stones.")]}),
    ]
}

fn hopwise(home: &Path, data: &Path) -> std::process::Command {
    scrubbed(env!("CARGO_BIN_EXE_hopwise"), home, data)
}

/// `program` with none of the caller's hopwise settings, only this test's home and data folders.
fn scrubbed(program: &str, home: &Path, data: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    for var in
        ["HOPWISE_CONFIG", "HOPWISE_LLM", "HOPWISE_MODEL", "HOPWISE_INDEX", "HOPWISE_BASE_URL", "HOPWISE_DATA_REGISTRY"]
    {
        cmd.env_remove(var);
    }
    cmd.env("HOPWISE_HOME", home).env("HOPWISE_DATA", data);
    cmd
}

async fn run(mut cmd: std::process::Command) -> std::process::Output {
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("run hopwise")).await.expect("join");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn eval(home: &Path, data: &Path, server: &str, strategies: &str, out: &Path) -> std::process::Command {
    let mut cmd = hopwise(home, data);
    // `--dataset tiny` is a name: it resolves to $HOPWISE_DATA/tiny.jsonl.
    cmd.args(["eval", "--json", "--context", "--dataset", "tiny", "--model", "scripted", "--base-url", server])
        .args(["--strategy", strategies, "--out"])
        .arg(out);
    cmd
}

/// Runs `hopwise report results --out EVALUATION.md` in `repo` and returns the document it wrote.
async fn regenerate(home: &Path, data: &Path, repo: &Path) -> String {
    let mut report = hopwise(home, data);
    report.current_dir(repo).args(["report", "results", "--out", "EVALUATION.md"]);
    run(report).await;
    std::fs::read_to_string(repo.join("EVALUATION.md")).expect("doc")
}

fn records(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("results.jsonl")).expect("results.jsonl");
    text.lines().map(|l| serde_json::from_str(l).expect("json line")).collect()
}

fn cover_em(records: &[Value], strategy: &str, id: &str) -> f64 {
    records
        .iter()
        .find(|r| r["strategy"] == strategy && r["id"] == id)
        .and_then(|r| r["metrics"]["cover_em"].as_f64())
        .unwrap_or_else(|| panic!("no {strategy}/{id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_has_intervals_and_rtr_pairs_and_the_report_regenerates_only_its_section() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (home, data) = (tmp.path().join("home"), tmp.path().join("data"));
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("tiny.jsonl"), dataset()).expect("dataset");
    let server =
        MockOpenAiServer::start(Arc::new(common::first_title_model("Answer: yes"))).await.expect("mock server");
    let url = server.base_url();

    // One run with both strategies: summary.md carries intervals and the paired comparison.
    let both = tmp.path().join("both");
    run(eval(&home, &data, &url, "direct,rtr", &both)).await;
    let rs = records(&both);
    let per_question: Vec<f64> =
        ["q1", "q2", "q3", "q4"].iter().map(|q| cover_em(&rs, "direct", q) - cover_em(&rs, "rtr", q)).collect();
    assert_eq!(per_question, vec![1.0, -1.0, 0.0, -1.0], "the scripted model behaves as designed");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(both.join("summary.json")).expect("summary.json")).expect("json");
    let paired = &summary["paired"][0];
    assert_eq!((paired["strategy"].as_str(), paired["baseline"].as_str()), (Some("direct"), Some("rtr")));
    let acc = &paired["accuracy"];
    assert_eq!((acc["wins"].as_u64(), acc["ties"].as_u64(), acc["losses"].as_u64()), (Some(1), Some(1), Some(2)));
    assert!((acc["mean"].as_f64().expect("mean") + 0.25).abs() < 1e-12);
    let (low, high) = (acc["interval"]["low"].as_f64().expect("low"), acc["interval"]["high"].as_f64().expect("high"));
    assert!(low <= -0.25 && -0.25 <= high && low >= -1.0 && high <= 1.0, "{acc}");
    let markdown = std::fs::read_to_string(both.join("summary.md")).expect("summary.md");
    assert!(markdown.contains("## Paired with rtr"), "{markdown}");
    assert!(markdown.contains("| tiny | direct | rtr | 4 | -25.0 ["), "{markdown}");
    assert!(markdown.contains("1 / 1 / 2 |"), "{markdown}");
    let header = "| Δ EM (pp) [95% CI] | Δ cover-EM (pp) [95% CI] | Δ F1 (pp) [95% CI] | wins / ties / losses (EM) |";
    assert!(markdown.contains(header), "EM, the headline, first: {markdown}");
    assert!(markdown.contains("| 50.00 (n=4) ["), "rtr's 50 % with its interval: {markdown}");
    assert!(markdown.contains("| prompt tokens | cached prompt tokens | completion tokens |"), "{markdown}");

    // A results/ tree as scripts/results.sh writes it: one folder per row.
    let repo = tmp.path().join("repo");
    let rows = repo.join("results/scripted/tiny");
    run(eval(&home, &data, &url, "direct", &rows.join("direct"))).await;
    run(eval(&home, &data, &url, "rtr", &rows.join("rtr"))).await;

    // `hopwise compare` pairs any two runs by question: the same figures as the summary, per type.
    let mut compare = hopwise(&home, &data);
    compare.arg("compare").args([rows.join("rtr"), rows.join("direct")]).args(["--by", "qtype"]);
    let table = String::from_utf8(run(compare).await.stdout).expect("utf-8");
    assert!(table.starts_with("direct against rtr, EM on the questions both answered\n"), "EM by default: {table}");
    assert!(table.contains("| all | 4 | 50.0 | 25.0 | -25.0 ["), "{table}");
    assert!(table.contains("| 1 / 1 / 2 | 1.00 / 1.00 |"), "{table}");
    assert!(table.contains("| comparison | 1 | 0.0 | 100.0 | +100.0 [+100.0, +100.0] | 1 / 0 / 0 |"), "{table}");
    assert!(table.contains("| bridge | 3 | 66.7 | 0.0 | -66.7 ["), "{table}");
    // Both strategies in one file: each side is chosen by name, and not guessed.
    let mut ambiguous = hopwise(&home, &data);
    ambiguous.arg("compare").arg(both.join("results.jsonl")).arg(&both);
    let out = ambiguous.output().expect("run hopwise");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("several strategies (direct, rtr)"), "{stderr}");
    let mut chosen = hopwise(&home, &data);
    chosen.arg("compare").arg(&both).arg(&both);
    chosen.args(["--base-strategy", "rtr", "--other-strategy", "direct", "--metric", "cover-em", "--json"]);
    let json: Value = serde_json::from_slice(&run(chosen).await.stdout).expect("json");
    let all = &json[0]["groups"][0]["difference"];
    assert_eq!((all["n"].as_u64(), all["wins"].as_u64(), all["losses"].as_u64()), (Some(4), Some(1), Some(2)));
    // One strategy on both sides (a re-run): the table names the runs, and every question ties.
    let mut rerun = hopwise(&home, &data);
    rerun.arg("compare").arg(rows.join("direct")).arg(&both).args(["--other-strategy", "direct"]);
    let table = String::from_utf8(run(rerun).await.stdout).expect("utf-8");
    assert!(table.starts_with("both against direct,"), "{table}");
    assert!(table.contains("| +0.0 [+0.0, +0.0] | 0 / 4 / 0 |"), "{table}");
    // Several runs against one base: one line per run.
    let mut several = hopwise(&home, &data);
    several.arg("compare").args([rows.join("rtr"), rows.join("direct"), rows.join("rtr")]);
    let table = String::from_utf8(run(several).await.stdout).expect("utf-8");
    assert!(table.contains("| direct | all | 4 | 50.0 | 25.0 | -25.0 ["), "{table}");
    assert!(table.contains("| other | all | 4 | 50.0 | 50.0 | +0.0 ["), "the base against itself: {table}");
    // Two runs of one strategy among them: each is named by its run.
    let again = tmp.path().join("again/direct-again");
    std::fs::create_dir_all(&again).expect("mkdir");
    for file in ["results.jsonl", "run.json"] {
        std::fs::copy(rows.join("direct").join(file), again.join(file)).expect("copy");
    }
    let mut reruns = hopwise(&home, &data);
    reruns.arg("compare").args([rows.join("rtr"), rows.join("direct"), again.clone()]);
    let table = String::from_utf8(run(reruns).await.stdout).expect("utf-8");
    assert!(table.contains("| direct | all | 4 |") && table.contains("| direct-again | all | 4 |"), "{table}");
    std::fs::write(
        repo.join("results/plan.tsv"),
        "# rows\ndirect\ttiny\tdirect\t-\t4\nrtr\ttiny\trtr\t-\t4\ncot\ttiny\tcot\t-\t4\n",
    )
    .expect("plan");
    let session = json!({"started": "2026-11-24T10:00:00Z", "ended": "2026-11-24T10:05:00Z", "threads": 1,
                         "concurrency": 2, "cpu": "Test CPU", "cpus": 2, "done_before": 0, "done_after": 4,
                         "revision": "abc1234"});
    std::fs::write(rows.join("rtr/sessions.jsonl"), format!("{session}\n")).expect("sessions");
    let hand = "# Evaluation\n\nHand-written intro.\n\n<!-- results:begin -->\nstale\n<!-- results:end -->\n\n## Older section\n\nKept as is.\n";
    std::fs::write(repo.join("EVALUATION.md"), hand).expect("doc");

    let doc = regenerate(&home, &data, &repo).await;
    assert!(doc.starts_with("# Evaluation\n\nHand-written intro.\n\n<!-- results:begin -->\n## Results"), "{doc}");
    assert!(doc.ends_with("<!-- results:end -->\n\n## Older section\n\nKept as is.\n"), "{doc}");
    assert!(!doc.contains("stale"));
    assert!(doc.contains("Generated by `hopwise report results --out EVALUATION.md`"), "{doc}");
    assert!(doc.contains("| direct | – | 4/4 | 25.0 ["), "{doc}");
    assert!(doc.contains("| rtr | – | 4/4 | 50.0 ["), "{doc}");
    assert!(doc.contains("| cot | – | 0/4 | – |"), "a planned row not yet run shows n = 0: {doc}");
    assert!(doc.contains("| tiny | direct | rtr | 4 | -25.0 ["), "{doc}");
    assert!(doc.contains("scripts/results.sh --only '^tiny/(direct|rtr|cot)$'"), "{doc}");
    assert!(doc.contains("1 inference threads, 2 questions at once, on Test CPU (2 CPUs), 2026-11-24"), "{doc}");
    assert!(doc.contains("code at rtr abc1234 ·"), "{doc}");
    assert!(doc.contains("not recorded for direct"), "{doc}");
    assert!(doc.contains("2 of 3 planned rows are complete"), "{doc}");
    assert!(doc.contains("](docs/results/scripted/tiny-cost.png)"), "{doc}");
    for ext in ["png", "svg"] {
        let plot = repo.join(format!("docs/results/scripted/tiny-cost.{ext}"));
        assert!(std::fs::metadata(&plot).map(|m| m.len() > 1000).unwrap_or(false), "{}", plot.display());
    }
    let svg = std::fs::read_to_string(repo.join("docs/results/scripted/tiny-cost.svg")).expect("svg");
    let labels: Vec<&str> = svg.lines().map(str::trim).collect();
    assert!(labels.contains(&"direct") && labels.contains(&"rtr"), "one labelled point per row");

    // Regenerating changes nothing.
    assert_eq!(regenerate(&home, &data, &repo).await, doc);

    // A row whose run.json records other prompts than this build's is marked as measuring them.
    let run_json = rows.join("direct/run.json");
    let mut fingerprint: Value = serde_json::from_slice(&std::fs::read(&run_json).expect("run.json")).expect("json");
    fingerprint["strategy_prompts"]["direct"] = json!("00000000deadbeef");
    std::fs::write(&run_json, serde_json::to_vec(&fingerprint).expect("json")).expect("write run.json");
    let doc = regenerate(&home, &data, &repo).await;
    assert!(doc.contains("| direct | – | 4/4 (earlier prompts) | 25.0 ["), "{doc}");
    assert!(doc.contains("*Earlier prompts*: `direct` (`direct` prompts 00000000deadbeef, now "), "{doc}");
    assert!(doc.contains("| rtr | – | 4/4 | 50.0 ["), "rtr's prompts are this build's: {doc}");
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The results section of EVALUATION.md is what `hopwise report results --out EVALUATION.md` makes
/// from the committed results/: no hand-copied numbers. After adding rows, rerun that command.
#[test]
fn the_committed_results_section_is_regenerated_from_results() {
    let root = repo_root();
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::copy(root.join("EVALUATION.md"), tmp.path().join("EVALUATION.md")).expect("copy EVALUATION.md");
    std::os::unix::fs::symlink(root.join("results"), tmp.path().join("results")).expect("link results");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hopwise"))
        .current_dir(tmp.path())
        .env("HOPWISE_HOME", tmp.path().join("home"))
        .args(["report", "results", "--out", "EVALUATION.md"])
        .output()
        .expect("run hopwise report");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let committed = std::fs::read_to_string(root.join("EVALUATION.md")).expect("read");
    let regenerated = std::fs::read_to_string(tmp.path().join("EVALUATION.md")).expect("read");
    assert!(
        committed == regenerated,
        "EVALUATION.md's results section is out of date: run `hopwise report results --out EVALUATION.md`"
    );
    for entry in std::fs::read_dir(tmp.path().join("docs/results")).expect("plots").flatten() {
        for plot in std::fs::read_dir(entry.path()).expect("model plots").flatten() {
            let committed = root.join("docs/results").join(entry.file_name()).join(plot.file_name());
            assert!(committed.is_file(), "{} is not committed", committed.display());
        }
    }
}

/// `scripts/results.sh` (the real script, in a scratch repository with its own plan) against the
/// real binary and a scripted model server: a spent budget starts nothing; a row runs to its limit,
/// records its session, and packs its traces; a row cut short resumes from its committed lines;
/// repacking unchanged traces gives the same bytes; unpacking restores them; an archived row leaves
/// the tables whole and its next run starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_results_script_runs_resumes_and_packs_traces_reproducibly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (home, data, repo) = (tmp.path().join("home"), tmp.path().join("data"), tmp.path().join("repo"));
    for dir in [&data, &repo.join("scripts"), &repo.join("results")] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    std::fs::write(data.join("tiny.jsonl"), dataset()).expect("dataset");
    // The pooled corpus: every question's paragraphs as passages.
    let corpus: Vec<Value> = questions()
        .iter()
        .flat_map(|q| {
            let id = q["id"].as_str().expect("id").to_string();
            let paragraphs = q["paragraphs"].as_array().expect("paragraphs").clone().into_iter().enumerate();
            paragraphs.map(move |(i, p)| json!({"id": format!("{id}-{i}"), "title": p["title"], "text": p["text"]}))
        })
        .collect();
    common::write_jsonl(&data.join("tiny_corpus.jsonl"), &corpus);
    std::fs::copy(repo_root().join("scripts/results.sh"), repo.join("scripts/results.sh")).expect("copy script");
    std::fs::write(repo.join("results/plan.tsv"), "# rows\ndirect\ttiny\tdirect\t-\t4\nrtr\ttiny\trtr\t-\t4\n")
        .expect("plan");
    let server =
        MockOpenAiServer::start(Arc::new(common::first_title_model("Answer: yes"))).await.expect("mock server");
    let script = |args: &[&str]| {
        let mut cmd = scrubbed("bash", &home, &data);
        cmd.current_dir(&repo)
            .env("HOPWISE_BIN", env!("CARGO_BIN_EXE_hopwise"))
            .env("HOPWISE_MODEL", "scripted")
            .env("HOPWISE_BASE_URL", server.base_url())
            .env("HOPWISE_REVISION", "test123")
            .env("HOPWISE_THREADS", "1")
            .arg("scripts/results.sh")
            .args(args);
        cmd
    };
    let row = repo.join("results/scripted/tiny/direct");
    let lines = |file: &str| -> Vec<Value> {
        std::fs::read_to_string(row.join(file))
            .map(|t| t.lines().map(|l| serde_json::from_str(l).expect("json line")).collect())
            .unwrap_or_default()
    };

    // A spent budget starts no question.
    let out = run(script(&["--budget", "0s", "--no-report", "--only", "^tiny/direct$"])).await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("time budget spent"), "{out:?}");
    assert!(!row.join("results.jsonl").exists());

    // The row runs to its limit, records who ran it, and packs its traces.
    let packing = ["--budget", "10m", "--no-report", "--pack-traces", "--only", "^tiny/direct$"];
    run(script(&packing)).await;
    assert_eq!(lines("results.jsonl").len(), 4);
    let sessions = lines("sessions.jsonl");
    assert_eq!(sessions.len(), 1);
    assert_eq!((sessions[0]["done_before"].as_u64(), sessions[0]["done_after"].as_u64()), (Some(0), Some(4)));
    assert_eq!(sessions[0]["revision"], "test123");
    assert!(!repo.join("results/scripted/tiny/rtr").exists(), "--only selects the rows");
    assert!(row.join("traces.tar.xz").is_file(), "a complete row is packed");

    // Cut short: the last question is gone, so the next run answers only it and says so.
    let mut kept = std::fs::read_to_string(row.join("results.jsonl")).expect("results");
    kept.truncate(kept.trim_end().rfind('\n').expect("several lines") + 1);
    std::fs::write(row.join("results.jsonl"), kept).expect("truncate");
    run(script(&packing)).await;
    let records = lines("results.jsonl");
    let mut ids: Vec<&str> = records.iter().filter_map(|r| r["id"].as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["q1", "q2", "q3", "q4"], "each question once");
    let sessions = lines("sessions.jsonl");
    assert_eq!(sessions.len(), 2);
    assert_eq!((sessions[1]["done_before"].as_u64(), sessions[1]["done_after"].as_u64()), (Some(3), Some(4)));

    // A complete row is not run again; its traces, written afresh (new dates, new directory order),
    // pack to the same bytes, and the archive restores every trace.
    let traces = row.join("traces");
    let before: Vec<(PathBuf, Vec<u8>)> = walk(&traces);
    assert_eq!(before.len(), 4, "one trace per question");
    let repacked = std::fs::read(row.join("traces.tar.xz")).expect("repacked");
    std::fs::remove_dir_all(&traces).expect("remove traces");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for (path, bytes) in before.iter().rev() {
        let path = traces.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("rewrite trace");
    }
    run(script(&packing)).await;
    assert_eq!(lines("sessions.jsonl").len(), 2, "a complete row records no session");
    let again = std::fs::read(row.join("traces.tar.xz")).expect("again");
    assert!(again == repacked, "the same traces packed to other bytes");
    std::fs::remove_dir_all(&traces).expect("remove traces");
    run(script(&["--unpack-traces", "--only", "^tiny/direct$"])).await;
    assert_eq!(walk(&traces), before);

    // Archived, the row moves whole (traces included) under results/archive/, and the next run
    // starts it from its first question.
    let refused = script(&["--archive"]).output().expect("run script");
    assert_eq!(refused.status.code(), Some(2), "--archive names its rows: {refused:?}");
    run(script(&["--archive", "--only", "^tiny/direct$"])).await;
    let archived = repo.join("results/archive/scripted/tiny/direct");
    assert!(!row.exists(), "the row left the tables");
    assert_eq!(walk(&archived.join("traces")), before);
    assert_eq!(std::fs::read(archived.join("traces.tar.xz")).expect("archived pack"), again);
    run(script(&["--budget", "10m", "--no-report", "--only", "^tiny/direct$"])).await;
    let sessions = lines("sessions.jsonl");
    assert_eq!(sessions.len(), 1, "a fresh row: {sessions:?}");
    assert_eq!((sessions[0]["done_before"].as_u64(), sessions[0]["done_after"].as_u64()), (Some(0), Some(4)));
    // A second archive of the same row would overwrite the first: refused, and nothing moves.
    let clash = script(&["--archive", "--only", "^tiny/direct$"]).output().expect("run script");
    assert!(!clash.status.success(), "{clash:?}");
    assert!(String::from_utf8_lossy(&clash.stderr).contains("already exists"), "{clash:?}");
    assert_eq!(lines("results.jsonl").len(), 4, "the row stays");
    assert_eq!(walk(&archived.join("traces")), before, "the archive stays");
}

/// Every file under `dir`, sorted, with its bytes.
fn walk(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read trace");
                files.push((path.strip_prefix(dir).expect("under dir").to_path_buf(), bytes));
            }
        }
    }
    files.sort();
    files
}
