//! `hopwise data fetch | list` end to end: the real binary downloads from a real HTTP server on
//! 127.0.0.1 (no network) small releases written here in each dataset's original format (JSON
//! arrays, JSONL and JSON inside deflated zip archives, CSV), verifies their pinned sha256,
//! converts them, and `hopwise eval --dataset NAME` then runs on the converted file. A corrupted
//! file, a truncated transfer and an unpinned file without `--allow-unpinned` are refused and leave
//! nothing behind. The records are invented for the test, not taken from the datasets.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hopwise_core::scripted::ScriptedLlm;
use hopwise_models::testing::MockOpenAiServer;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Serves `files` by path; `/truncated/<name>` announces 1,000 bytes more than it sends, then hangs up;
/// `/unframed/<name>` sends half of the file with no length at all and hangs up (the body ends at the
/// close, so the cut cannot be seen in the transfer).
struct FileServer {
    base: String,
    requests: Arc<AtomicUsize>,
}

impl FileServer {
    fn start(files: BTreeMap<String, Vec<u8>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).map(|n| n == 1).unwrap_or(false) {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (name, truncated) = match path.strip_prefix("/truncated") {
                    Some(rest) => (rest.to_string(), true),
                    None => (path.clone(), false),
                };
                if let Some(body) = path.strip_prefix("/unframed/").and_then(|name| files.get(name)) {
                    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n");
                    let _ = stream.write_all(&body[..body.len() / 2]);
                    continue;
                }
                let Some(body) = files.get(name.trim_start_matches('/')) else {
                    let _ =
                        stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    continue;
                };
                let declared = body.len() + if truncated { 1000 } else { 0 };
                let header = format!("HTTP/1.1 200 OK\r\ncontent-length: {declared}\r\nconnection: close\r\n\r\n");
                let _ = stream.write_all(header.as_bytes());
                let _ = stream.write_all(body);
                let _ = stream.flush();
            }
        });
        Self { base, requests }
    }

    fn url(&self, name: &str) -> String {
        format!("{}/{name}", self.base)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn zip_of(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in members {
            zip.start_file(*name, options).expect("zip entry");
            zip.write_all(bytes).expect("zip write");
        }
        zip.finish().expect("zip finish");
    }
    out.into_inner()
}

fn to_bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("json")
}

/// One small release per dataset, in its original layout, keyed by the file name served.
fn releases() -> BTreeMap<String, Vec<u8>> {
    let hotpot = json!([
        {"_id": "h1", "question": "In which town is the festival founded by Ada Vance held?", "answer": "Port Ellis",
         "type": "bridge", "level": "hard", "supporting_facts": [["Ada Vance", 1], ["Glimmer Festival", 1]],
         "context": [["Ada Vance", ["Ada Vance is a composer.", " She founded the Glimmer Festival."]],
                     ["Glimmer Festival", ["The Glimmer Festival is held every May.", "  It takes place in Port Ellis."]],
                     ["Tidewater", ["Tidewater is a lake."]]]},
        {"_id": "h2", "question": "Are Ada Vance and Bo Lind both composers?", "answer": "no", "type": "comparison",
         "level": "easy", "supporting_facts": [["Ada Vance", 0], ["Bo Lind", 0]],
         "context": [["Ada Vance", ["Ada Vance is a composer.", " She founded the Glimmer Festival."]],
                     ["Bo Lind", ["Bo Lind is a painter."]]]}
    ]);
    let two_wiki = json!([
        {"_id": "w1", "type": "compositional", "question": "Who is the mother of the director of Quiet Harbour?",
         "context": [["Quiet Harbour", ["Quiet Harbour is a 1961 film.", "It was directed by Ivo Marsh."]],
                     ["Ivo Marsh", ["Ivo Marsh was a director.", "His mother was Lena Marsh."]]],
         "supporting_facts": [["Quiet Harbour", 1], ["Ivo Marsh", 1]],
         "evidences": [["Quiet Harbour", "director", "Ivo Marsh"], ["Ivo Marsh", "mother", "Lena Marsh"]],
         "answer": "Lena Marsh"}
    ]);
    let musique_lines = [
        json!({"id": "2hop__1_2", "question": "When was the employer of Nora Quill founded?", "answer": "1862",
               "answer_aliases": ["in 1862"], "answerable": true,
               "paragraphs": [{"idx": 0, "title": "Nora Quill", "paragraph_text": "Nora Quill works at Hale University.", "is_supporting": true},
                              {"idx": 1, "title": "Hale University", "paragraph_text": "Hale University was founded in 1862.", "is_supporting": true},
                              {"idx": 2, "title": "Moss", "paragraph_text": "Moss grows on stones.", "is_supporting": false}],
               "question_decomposition": [{"id": 1, "question": "Nora Quill >> employer", "answer": "Hale University", "paragraph_support_idx": 0},
                                          {"id": 2, "question": "When was #1 founded?", "answer": "1862", "paragraph_support_idx": 1}]}),
        json!({"id": "3hop1__9_8_7", "question": "Unanswerable?", "answer": "", "answer_aliases": [], "answerable": false,
               "paragraphs": [], "question_decomposition": []}),
    ];
    let musique = musique_lines.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n") + "\n";
    let multihop_questions = json!([
        {"query": "Which outlet reported the Orbit launch that another outlet called delayed?", "answer": "The Ledger",
         "question_type": "inference_query",
         "evidence_list": [{"title": "Orbit launches", "fact": "The Ledger reported the Orbit launch.", "source": "The Ledger"},
                           {"title": "Orbit delays", "fact": "Orbit was delayed, Daily Wire said.", "source": "Daily Wire"}]},
        {"query": "Did anything happen?", "answer": "Insufficient information.", "question_type": "null_query", "evidence_list": []}
    ]);
    let multihop_corpus = json!([
        {"title": "Orbit launches", "body": "The Ledger reported the Orbit launch.  More text.", "source": "The Ledger",
         "published_at": "2023-10-01T00:00:00+00:00", "url": "https://example.org/1", "category": "science", "author": "A"},
        {"title": "Orbit delays", "body": "Orbit was delayed, Daily Wire said.", "source": "Daily Wire",
         "published_at": "2023-10-02T00:00:00+00:00", "url": "https://example.org/2", "category": "science", "author": "B"}
    ]);
    let strategy_questions = json!([
        {"qid": "s1", "term": "Kettle", "description": "a pot", "question": "Could a kettle boil water on the Moon?",
         "answer": false, "facts": ["The Moon has no air."], "decomposition": ["Is there air on the Moon?", "Can #1 ..."],
         "evidence": [[[["Moon-1"]], ["operation"]], [[["Moon-1", "Kettle-0"]], ["no_evidence"]]]}
    ]);
    let strategy_paragraphs = json!({
        "Moon-1": {"title": "Moon", "section": "", "headers": [], "para_index": 1, "content": "The Moon has no atmosphere."},
        "Kettle-0": {"title": "Kettle", "section": "", "headers": [], "para_index": 0, "content": "A kettle heats water."},
        "Unused-3": {"title": "Unused", "section": "", "headers": [], "para_index": 3, "content": "Not cited."}
    });
    let bamboogle = "Question,Answer\n\"Who founded the festival held in Port Ellis, a town by a lake?\",Ada Vance\n\"What is 2, plus 2?\",4\n";

    let mut files = BTreeMap::new();
    files.insert("hotpot_dev_distractor_v1.json".to_string(), to_bytes(&hotpot));
    files.insert(
        "data.zip".to_string(),
        zip_of(&[("data/dev.json", to_bytes(&two_wiki)), ("data/train.json", b"[]".to_vec())]),
    );
    files.insert(
        "musique_v1.0.zip".to_string(),
        zip_of(&[("data/musique_ans_v1.0_dev.jsonl", musique.into_bytes()), ("__MACOSX/data/._x", b"junk".to_vec())]),
    );
    files.insert("MultiHopRAG.json".to_string(), to_bytes(&multihop_questions));
    files.insert("corpus.json".to_string(), to_bytes(&multihop_corpus));
    files.insert(
        "strategyqa_dataset.zip".to_string(),
        zip_of(&[
            ("strategyqa_train.json", to_bytes(&strategy_questions)),
            ("strategyqa_train_paragraphs.json", to_bytes(&strategy_paragraphs)),
        ]),
    );
    files.insert("bamboogle.csv".to_string(), bamboogle.as_bytes().to_vec());
    files
}

/// A registry like the built-in one, pointing at the test server, pinned to the served bytes
/// (`corrupt` pins a wrong sha256 for that file; `truncate` serves it through the truncating path).
fn registry(
    server: &FileServer,
    files: &BTreeMap<String, Vec<u8>>,
    corrupt: Option<&str>,
    truncate: Option<&str>,
) -> String {
    let datasets = [
        ("hotpotqa", "HotpotQA", "hotpotqa", vec!["hotpot_dev_distractor_v1.json"], "[]"),
        ("2wikimultihopqa", "2WikiMultiHopQA", "2wikimultihopqa", vec!["data.zip"], "[\"2wiki\"]"),
        ("musique", "MuSiQue", "musique", vec!["musique_v1.0.zip"], "[]"),
        ("multihop_rag", "MultiHop-RAG", "multihop_rag", vec!["MultiHopRAG.json", "corpus.json"], "[\"multihop-rag\"]"),
        ("strategyqa", "StrategyQA", "strategyqa", vec!["strategyqa_dataset.zip"], "[]"),
        ("bamboogle", "Bamboogle", "bamboogle", vec!["bamboogle.csv"], "[]"),
    ];
    let mut toml = String::new();
    for (name, title, format, names, aliases) in datasets {
        toml.push_str(&format!(
            "[[dataset]]\nname = \"{name}\"\naliases = {aliases}\ntitle = \"{title}\"\ndescription = \"test\"\nlicense = \"test\"\nhomepage = \"http://127.0.0.1/\"\nformat = \"{format}\"\n"
        ));
        for file in names {
            let url = if truncate == Some(file) { server.url(&format!("truncated/{file}")) } else { server.url(file) };
            toml.push_str(&format!("[[dataset.file]]\nname = \"{file}\"\nurl = \"{url}\"\n"));
            if name == "bamboogle" {
                toml.push_str("unpinned = \"a sheet export\"\n");
                continue;
            }
            let sha = if corrupt == Some(file) { "0".repeat(64) } else { sha256(&files[file]) };
            toml.push_str(&format!(
                "sha256 = \"{sha}\"\nchecksum_source = \"the test\"\nsize = {}\n",
                files[file].len()
            ));
        }
    }
    toml
}

fn hopwise(home: &Path, registry: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hopwise"));
    for var in ["HOPWISE_CONFIG", "HOPWISE_LLM", "HOPWISE_MODEL", "HOPWISE_INDEX", "HOPWISE_DATA", "HOPWISE_BASE_URL"] {
        cmd.env_remove(var);
    }
    cmd.env("HOPWISE_HOME", home).env("HOPWISE_DATA_REGISTRY", registry);
    cmd
}

fn run(mut cmd: std::process::Command) -> std::process::Output {
    cmd.output().expect("run hopwise")
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn data_dir(home: &Path, name: &str) -> PathBuf {
    home.join("data").join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_verifies_converts_and_resolves_every_dataset() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    let files = releases();
    let server = FileServer::start(files.clone());
    let registry_path = tmp.path().join("registry.toml");
    std::fs::write(&registry_path, registry(&server, &files, None, None)).expect("registry");

    // Without --allow-unpinned the unpinned Bamboogle sheet is refused before any download.
    let refused = run({
        let mut c = hopwise(&home, &registry_path);
        c.args(["data", "fetch", "bamboogle"]);
        c
    });
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--allow-unpinned") && err.contains("a sheet export"), "{err}");
    assert_eq!(server.requests(), 0);

    let all = ["hotpotqa", "2wiki", "musique", "multihop-rag", "strategyqa", "bamboogle"];
    let fetched = run({
        let mut c = hopwise(&home, &registry_path);
        c.args(["data", "fetch", "--json", "--allow-unpinned"]).args(all);
        c
    });
    assert!(fetched.status.success(), "{}", String::from_utf8_lossy(&fetched.stderr));
    let outcomes: Vec<Value> = serde_json::from_slice(&fetched.stdout).expect("json");
    assert_eq!(outcomes.len(), 6);
    assert_eq!(server.requests(), 7, "one request per file");

    // HotpotQA: sentences joined as they are, whitespace collapsed, supporting from supporting_facts.
    let hotpot = lines(&data_dir(&home, "hotpotqa").join("hotpotqa.jsonl"));
    assert_eq!(hotpot.len(), 2);
    assert_eq!(hotpot[0]["answers"], json!(["Port Ellis"]));
    assert_eq!(hotpot[0]["type"], "bridge");
    assert_eq!(
        hotpot[0]["paragraphs"][1]["text"],
        "The Glimmer Festival is held every May. It takes place in Port Ellis."
    );
    assert_eq!(hotpot[0]["paragraphs"][2]["supporting"], false);
    assert_eq!(hotpot[0]["meta"]["level"], "hard");
    let corpus = lines(&data_dir(&home, "hotpotqa").join("hotpotqa_corpus.jsonl"));
    assert_eq!(corpus.len(), 4, "Ada Vance appears in both questions but once in the corpus");
    assert_eq!(corpus[0]["id"], "hotpotqa-0");

    // 2Wiki (zip): sentences joined with one space; evidences kept in meta.
    let wiki = lines(&data_dir(&home, "2wikimultihopqa").join("2wikimultihopqa.jsonl"));
    assert_eq!(wiki[0]["paragraphs"][0]["text"], "Quiet Harbour is a 1961 film. It was directed by Ivo Marsh.");
    assert_eq!(wiki[0]["meta"]["evidences"][1][2], "Lena Marsh");

    // MuSiQue (zip, JSONL): unanswerable rows dropped, aliases added, hop type from the id.
    let musique = lines(&data_dir(&home, "musique").join("musique.jsonl"));
    assert_eq!(musique.len(), 1);
    assert_eq!((musique[0]["type"].as_str(), &musique[0]["answers"]), (Some("2hop"), &json!(["1862", "in 1862"])));
    assert_eq!(musique[0]["decomposition"][1]["question"], "When was #1 founded?");

    // MultiHop-RAG: the articles are the corpus; evidence links to its article.
    let mhr = lines(&data_dir(&home, "multihop_rag").join("multihop_rag.jsonl"));
    assert_eq!(mhr[0]["paragraphs"][1]["article_id"], "art0001");
    assert_eq!(mhr[1]["paragraphs"], json!([]));
    let articles = lines(&data_dir(&home, "multihop_rag").join("multihop_rag_corpus.jsonl"));
    assert_eq!(
        (articles.len(), articles[0]["text"].as_str()),
        (2, Some("The Ledger reported the Orbit launch. More text."))
    );
    assert_eq!(articles[0]["source"], "The Ledger");

    // StrategyQA: cited paragraphs only, each once; yes/no answers.
    let strategy = lines(&data_dir(&home, "strategyqa").join("strategyqa.jsonl"));
    let titles: Vec<&str> =
        strategy[0]["paragraphs"].as_array().expect("paragraphs").iter().filter_map(|p| p["title"].as_str()).collect();
    assert_eq!((titles, &strategy[0]["answers"]), (vec!["Moon", "Kettle"], &json!(["no"])));

    // Bamboogle: CSV with quoted commas; no corpus; its unverified sha256 is recorded.
    let bamboogle = lines(&data_dir(&home, "bamboogle").join("bamboogle.jsonl"));
    assert_eq!(bamboogle[1]["question"], "What is 2, plus 2?");
    assert!(!data_dir(&home, "bamboogle").join("bamboogle_corpus.jsonl").exists());
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(data_dir(&home, "bamboogle").join("source.json")).expect("manifest"))
            .expect("json");
    assert_eq!(manifest["files"][0]["pinned"], false);
    assert_eq!(manifest["files"][0]["sha256"], sha256(&files["bamboogle.csv"]));
    assert!(!data_dir(&home, "hotpotqa").join("downloads").exists(), "downloads removed after conversion");

    // A second fetch finds everything cached and asks the server nothing.
    let again = run({
        let mut c = hopwise(&home, &registry_path);
        c.args(["data", "fetch", "hotpotqa", "2wiki"]);
        c
    });
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already cached"));
    assert_eq!(server.requests(), 7);

    let listed = run({
        let mut c = hopwise(&home, &registry_path);
        c.args(["data", "list", "--json"]);
        c
    });
    let listed: Vec<Value> = serde_json::from_slice(&listed.stdout).expect("list json");
    assert!(listed.iter().all(|d| d["cached"].is_object()), "{listed:?}");

    // `--dataset hotpotqa` now resolves to the fetched file: a real eval over it, answers from a
    // real HTTP model server, retrieval from each question's own paragraphs.
    let model =
        MockOpenAiServer::start(Arc::new(ScriptedLlm::new().fallback("Answer: Port Ellis"))).await.expect("mock");
    let out = tmp.path().join("run");
    let mut eval = hopwise(&home, &registry_path);
    eval.args(["eval", "--json", "--context", "--strategy", "rtr", "--dataset", "hotpotqa", "--dataset", "2wiki"])
        .args(["--model", "scripted", "--base-url", &model.base_url(), "--out"])
        .arg(&out);
    let evaluated = tokio::task::spawn_blocking(move || run(eval)).await.expect("join");
    assert!(evaluated.status.success(), "{}", String::from_utf8_lossy(&evaluated.stderr));
    let records = lines(&out.join("results.jsonl"));
    assert_eq!(records.len(), 3, "2 HotpotQA + 1 2Wiki questions");
    let right: Vec<(&str, f64)> = records
        .iter()
        .map(|r| (r["id"].as_str().unwrap_or(""), r["metrics"]["cover_em"].as_f64().unwrap_or(-1.0)))
        .collect();
    assert!(right.contains(&("h1", 1.0)) && right.contains(&("h2", 0.0)) && right.contains(&("w1", 0.0)), "{right:?}");

    // A name that is not fetched says how to fetch it.
    let mut missing = hopwise(&home, &registry_path);
    missing.args(["eval", "--strategy", "direct", "--dataset", "nonesuch", "--out"]).arg(tmp.path().join("x"));
    let missing = run(missing);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no dataset file `nonesuch`"));
}

#[test]
fn a_checksum_mismatch_or_a_truncated_transfer_leaves_nothing_cached() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = releases();
    let server = FileServer::start(files.clone());

    let home = tmp.path().join("home-corrupt");
    let registry_path = tmp.path().join("corrupt.toml");
    std::fs::write(&registry_path, registry(&server, &files, Some("data.zip"), None)).expect("registry");
    let mut cmd = hopwise(&home, &registry_path);
    cmd.args(["data", "fetch", "2wiki"]);
    let out = run(cmd);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("data.zip") && err.contains(&sha256(&files["data.zip"])) && err.contains("pinned"), "{err}");
    let dir = data_dir(&home, "2wikimultihopqa");
    assert!(!dir.join("source.json").exists() && !dir.join("2wikimultihopqa.jsonl").exists());
    assert!(
        !dir.join("downloads/data.zip").exists() && !dir.join("downloads/data.zip.part").exists(),
        "no download kept"
    );

    let home = tmp.path().join("home-truncated");
    let registry_path = tmp.path().join("truncated.toml");
    std::fs::write(&registry_path, registry(&server, &files, None, Some("hotpot_dev_distractor_v1.json")))
        .expect("registry");
    let mut cmd = hopwise(&home, &registry_path);
    cmd.args(["data", "fetch", "hotpotqa"]);
    let out = run(cmd);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("truncated"), "{err}");
    let dir = data_dir(&home, "hotpotqa");
    assert!(!dir.join("source.json").exists() && !dir.join("hotpotqa.jsonl").exists());
    assert!(!dir.join("downloads/hotpot_dev_distractor_v1.json.part").exists(), "the partial file is deleted");

    // The same fetch against the intact file then succeeds: nothing stale got in the way.
    std::fs::write(&registry_path, registry(&server, &files, None, None)).expect("registry");
    let mut cmd = hopwise(&home, &registry_path);
    cmd.args(["data", "fetch", "hotpotqa"]);
    let out = run(cmd);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lines(&dir.join("hotpotqa.jsonl")).len(), 2);
}

/// An unpinned file sent without its length is refused even with `--allow-unpinned`: a cut-off
/// transfer would pass for the whole file.
#[test]
fn an_unpinned_file_sent_without_its_length_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = releases();
    let server = FileServer::start(files.clone());
    let registry_path = tmp.path().join("unframed.toml");
    let toml = format!(
        "[[dataset]]\nname = \"bamboogle\"\ntitle = \"Bamboogle\"\ndescription = \"test\"\nlicense = \"test\"\n\
         homepage = \"http://127.0.0.1/\"\nformat = \"bamboogle\"\n[[dataset.file]]\nname = \"bamboogle.csv\"\n\
         url = \"{}\"\nunpinned = \"a sheet export\"\n",
        server.url("unframed/bamboogle.csv")
    );
    std::fs::write(&registry_path, toml).expect("registry");
    let home = tmp.path().join("home");
    let mut cmd = hopwise(&home, &registry_path);
    cmd.args(["data", "fetch", "--allow-unpinned", "bamboogle"]);
    let out = run(cmd);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without its length") && err.contains("pin"), "{err}");
    let dir = data_dir(&home, "bamboogle");
    assert!(!dir.join("bamboogle.jsonl").exists() && !dir.join("downloads/bamboogle.csv").exists());
    assert!(!dir.join("downloads/bamboogle.csv.part").exists(), "the partial file is deleted");

    // A file larger than its registry's `max_size` is refused before its bytes reach the disk.
    let toml = format!(
        "[[dataset]]\nname = \"bamboogle\"\ntitle = \"Bamboogle\"\ndescription = \"test\"\nlicense = \"test\"\n\
         homepage = \"http://127.0.0.1/\"\nformat = \"bamboogle\"\n[[dataset.file]]\nname = \"bamboogle.csv\"\n\
         url = \"{}\"\nsha256 = \"{}\"\nchecksum_source = \"the test\"\nmax_size = 10\n",
        server.url("bamboogle.csv"),
        sha256(&files["bamboogle.csv"])
    );
    std::fs::write(&registry_path, toml).expect("registry");
    let mut cmd = hopwise(&home, &registry_path);
    cmd.args(["data", "fetch", "bamboogle"]);
    let out = run(cmd);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("more than the 10"), "{err}");
    assert!(!dir.join("downloads/bamboogle.csv").exists() && !dir.join("downloads/bamboogle.csv.part").exists());
}

/// `hopwise data demos` writes a pool from the examples after the evaluated ones, and `hgot` shows
/// those demonstrations in its prompts to a real HTTP model server. A file with nothing usable is
/// refused and writes nothing. The records are invented for the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demonstration_pool_is_built_and_shown_to_hgot() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    // The built-in registry: every dataset here is a file.
    let hopwise = |home: &Path| {
        let mut cmd = hopwise(home, Path::new("unused"));
        cmd.env_remove("HOPWISE_DATA_REGISTRY");
        cmd
    };
    let record = |id: &str, question: &str, answer: &str, support: &str| {
        json!({"id": id, "question": question, "answers": [answer], "type": "bridge", "paragraphs": [
            {"title": "Port Ellis", "text": format!("Port Ellis is a harbour town. {support}"), "supporting": true},
            {"title": "Moon", "text": "The Moon orbits the Earth.", "supporting": false},
        ]})
    };
    let dataset = tmp.path().join("towns.jsonl");
    let rows = [
        record("e1", "Which harbour town was founded by Ada Quill?", "Port Ellis", "Ada Quill founded it in 1820."),
        record("p1", "Who founded the harbour town of Port Ellis?", "Ada Quill", "Ada Quill founded it in 1820."),
        record("p2", "In which year was Port Ellis founded?", "1820", "Ada Quill founded it in 1820."),
    ];
    std::fs::write(&dataset, rows.iter().map(|r| format!("{r}\n")).collect::<String>()).expect("dataset");

    let pool = tmp.path().join("demos/pool.jsonl");
    let mut build = hopwise(&home);
    build.args(["data", "demos", "--json", "--skip", "1", "--dataset"]).arg(&dataset).arg("--out").arg(&pool);
    let built = run(build);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let summary: Value = serde_json::from_slice(&built.stdout).expect("json");
    assert_eq!(summary["report"]["kept"], 2, "{summary}");
    let demos = lines(&pool);
    assert_eq!(demos.len(), 2);
    assert!(demos.iter().all(|d| d["question"] != rows[0]["question"]), "the evaluated question is no demo");
    assert_eq!(demos[0]["passages"], json!(["Port Ellis: Ada Quill founded it in 1820."]));
    assert_eq!(demos[0]["rationale"], "Ada Quill founded it in 1820 [1].");

    let shown = Arc::new(AtomicUsize::new(0));
    let counter = shown.clone();
    let demo_question = demos[0]["question"].as_str().expect("question").to_string();
    let llm = ScriptedLlm::new()
        .on_fn("Solved examples:", move |prompt, _| {
            if prompt.contains(&demo_question) {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            "Port Ellis was founded by Ada Quill [1].\nAnswer: Port Ellis".into()
        })
        .fallback("Port Ellis was founded by Ada Quill [1].\nAnswer: Port Ellis");
    let model = MockOpenAiServer::start(Arc::new(llm)).await.expect("mock");
    let out = tmp.path().join("run");
    let mut eval = hopwise(&home);
    eval.args(["eval", "--json", "--context", "--strategy", "hgot", "--limit", "1", "--dataset"])
        .arg(&dataset)
        .args(["--opt", &format!("demonstrations={}", pool.display()), "--opt", "demo_count=2"])
        .args(["--model", "scripted", "--base-url", &model.base_url(), "--out"])
        .arg(&out);
    let evaluated = tokio::task::spawn_blocking(move || run(eval)).await.expect("join");
    assert!(evaluated.status.success(), "{}", String::from_utf8_lossy(&evaluated.stderr));
    assert_eq!(lines(&out.join("results.jsonl")).len(), 1);
    assert!(shown.load(Ordering::SeqCst) > 0, "no prompt showed the pool's demonstrations");

    // Nothing usable after the skipped examples: a clear error, no file.
    let empty = tmp.path().join("empty.jsonl");
    let mut refuse = hopwise(&home);
    refuse.args(["data", "demos", "--skip", "3", "--dataset"]).arg(&dataset).arg("--out").arg(&empty);
    let refused = run(refuse);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no demonstration could be built"), "{refused:?}");
    assert!(!empty.exists() && !empty.with_extension("jsonl.partial").exists());
    assert!(!empty.with_extension("jsonl.tmp").exists());
}
