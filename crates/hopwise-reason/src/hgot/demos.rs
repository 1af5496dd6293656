//! Optional few-shot demonstrations: a JSONL pool of solved examples, filtered the way the paper
//! filters its pool, and selected per question by k-nearest neighbours or balanced sampling.
//!
//! Pool line: `{"question": …, "rationale": …, "answer": …, "steps": [..]?, "passages": [..]?}`.
//! Filters (counted in [`DemoPool::dropped`]): a rationale without any `[n]` marker fails the
//! citation format; a demonstration with a step longer than `Q3 + 1.5·IQR` of all step lengths
//! (in words) is over-long.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::citations::take_markers;
use super::options::DemoSelection;
use crate::error::Result;

/// One pool line; written by `hopwise data demos` and read here, so both sides share this type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Demonstration {
    pub question: String,
    pub rationale: String,
    pub answer: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passages: Vec<String>,
}

/// The largest demonstration pool file read.
pub const MAX_POOL_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone, Default)]
pub struct DemoPool {
    pub demos: Vec<Demonstration>,
    /// Lines dropped by the format and length filters.
    pub dropped: usize,
}

impl DemoPool {
    /// Parses a JSONL pool; blank lines are skipped, a malformed line is an error naming it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut demos = Vec::new();
        let mut dropped = 0;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let demo: Demonstration = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
            if take_markers(&demo.rationale).1.is_empty() || demo.answer.trim().is_empty() {
                dropped += 1;
            } else {
                demos.push(demo);
            }
        }
        let limit = step_length_limit(&demos);
        let before = demos.len();
        demos.retain(|d| d.steps.iter().all(|s| (s.split_whitespace().count() as f64) <= limit));
        dropped += before - demos.len();
        Ok(Self { demos, dropped })
    }

    /// Reads a pool file: only a regular file of at most [`MAX_POOL_BYTES`] (a device, a FIFO or a
    /// huge file is refused before it is read).
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        use std::io::Read;
        let named = |e: std::io::Error| format!("{}: {e}", path.display());
        let file = std::fs::File::open(path).map_err(named)?;
        let meta = file.metadata().map_err(named)?;
        if !meta.is_file() {
            return Err(format!("{}: not a regular file", path.display()));
        }
        if meta.len() > MAX_POOL_BYTES {
            return Err(format!("{}: {} bytes; a pool holds at most {MAX_POOL_BYTES}", path.display(), meta.len()));
        }
        let mut text = String::new();
        file.take(MAX_POOL_BYTES + 1).read_to_string(&mut text).map_err(named)?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn is_empty(&self) -> bool {
        self.demos.is_empty()
    }

    pub fn questions(&self) -> Vec<String> {
        self.demos.iter().map(|d| d.question.clone()).collect()
    }
}

/// `Q3 + 1.5·IQR` of the step lengths in words (linear-interpolated quartiles); infinite with
/// fewer than four steps, where quartiles mean little.
pub fn step_length_limit(demos: &[Demonstration]) -> f64 {
    let mut lengths: Vec<f64> =
        demos.iter().flat_map(|d| d.steps.iter()).map(|s| s.split_whitespace().count() as f64).collect();
    if lengths.len() < 4 {
        return f64::INFINITY;
    }
    lengths.sort_by(f64::total_cmp);
    let quantile = |q: f64| {
        let pos = q * (lengths.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        lengths[lo] + (lengths[hi] - lengths[lo]) * (pos - pos.floor())
    };
    let (q1, q3) = (quantile(0.25), quantile(0.75));
    q3 + 1.5 * (q3 - q1)
}

/// The normalised words of `s` (SQuAD normalisation: no punctuation, no articles).
pub fn word_set(s: &str) -> BTreeSet<String> {
    hopwise_core::text::normalize_answer(s).split_whitespace().map(str::to_string).collect()
}

/// Indices of the `k` pool questions most similar to `question` by word-set Jaccard (ties: pool
/// order).
pub fn knn_lexical(pool: &[String], question: &str, k: usize) -> Vec<usize> {
    let q = word_set(question);
    let scores: Vec<f64> = pool.iter().map(|p| crate::uncertainty::jaccard_sets(&q, &word_set(p))).collect();
    top_k(&scores, k)
}

/// Indices of the `k` pool vectors with the highest cosine to `query` (ties: pool order).
pub fn knn_embedded(pool: &[Vec<f32>], query: &[f32], k: usize) -> Vec<usize> {
    let scores: Vec<f64> = pool.iter().map(|v| cosine(v, query)).collect();
    top_k(&scores, k)
}

fn top_k(scores: &[f64], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order.truncate(k);
    order
}

/// Cosine similarity; 0 for empty, mismatched or zero vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 || !dot.is_finite() {
        0.0
    } else {
        (dot / (na * nb)).clamp(-1.0, 1.0)
    }
}

/// FNV-1a, so the rotation of balanced sampling is the same on every platform and release.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn answer_class(answer: &str) -> usize {
    match hopwise_core::text::normalize_answer(answer).as_str() {
        "yes" | "true" | "supports" => 0,
        "no" | "false" | "refutes" => 1,
        _ => 2,
    }
}

/// `k` demonstrations spread over the answer classes (yes / no / other) in turn, each class read
/// from an offset derived from the question, so questions see different but reproducible demos.
pub fn balanced(pool: &[Demonstration], question: &str, k: usize) -> Vec<usize> {
    let mut classes: Vec<Vec<usize>> = vec![Vec::new(); 3];
    for (i, d) in pool.iter().enumerate() {
        classes[answer_class(&d.answer)].push(i);
    }
    let seed = fnv1a(question) as usize;
    let mut queues: Vec<Vec<usize>> = classes
        .into_iter()
        .filter(|c| !c.is_empty())
        .map(|mut c| {
            let len = c.len();
            c.rotate_left(seed % len);
            c.reverse(); // pop from the back = read in rotated order
            c
        })
        .collect();
    let mut out = Vec::with_capacity(k);
    while out.len() < k && queues.iter().any(|q| !q.is_empty()) {
        for q in queues.iter_mut() {
            if out.len() == k {
                break;
            }
            if let Some(i) = q.pop() {
                out.push(i);
            }
        }
    }
    out
}

/// Selection without embeddings (balanced, or lexical kNN).
pub fn select_lexical(pool: &DemoPool, selection: DemoSelection, question: &str, k: usize) -> Vec<usize> {
    match selection {
        DemoSelection::Balanced => balanced(&pool.demos, question, k),
        DemoSelection::Knn => knn_lexical(&pool.questions(), question, k),
    }
}

/// Fills a template by name (`Ctx::render`, which also records what a strategy rendered).
pub trait Render: Fn(&str, &[(&str, &str)]) -> Result<String> {}
impl<F: Fn(&str, &[(&str, &str)]) -> Result<String>> Render for F {}

/// The Probe/Infer demonstrations block (`hgot_demos` of `hgot_demo_thought` examples; it ends with
/// a blank line), or "" for none.
pub fn render_thoughts(pool: &DemoPool, picked: &[usize], render: &impl Render) -> Result<String> {
    let mut examples = Vec::new();
    for demo in picked.iter().filter_map(|&i| pool.demos.get(i)) {
        let passages = if demo.passages.is_empty() {
            String::new()
        } else {
            let listed: Vec<String> =
                demo.passages.iter().enumerate().map(|(i, p)| format!("[{}] {p}", i + 1)).collect();
            render("hgot_demo_passages", &[("passages", &listed.join("\n"))])?
        };
        examples.push(render(
            "hgot_demo_thought",
            &[
                ("passages", &passages),
                ("question", &demo.question),
                ("rationale", &demo.rationale),
                ("answer", &demo.answer),
            ],
        )?);
    }
    wrap(examples, render)
}

/// The Plan demonstrations block (`hgot_demo_plan` examples, in the Plan's `Step N:` protocol) from
/// the picked demos that carry steps.
pub fn render_plans(pool: &DemoPool, picked: &[usize], render: &impl Render) -> Result<String> {
    let mut examples = Vec::new();
    for demo in picked.iter().filter_map(|&i| pool.demos.get(i)).filter(|d| !d.steps.is_empty()) {
        let steps: Vec<String> = demo.steps.iter().enumerate().map(|(i, s)| format!("Step {}: {s}", i + 1)).collect();
        examples.push(render("hgot_demo_plan", &[("question", &demo.question), ("steps", &steps.join("\n"))])?);
    }
    wrap(examples, render)
}

fn wrap(examples: Vec<String>, render: &impl Render) -> Result<String> {
    if examples.is_empty() {
        return Ok(String::new());
    }
    render("hgot_demos", &[("examples", &examples.join("\n\n"))])
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = r#"{"question": "Is Paris in France?", "rationale": "Paris is in France [1].", "answer": "yes"}
{"question": "Is Rome in Spain?", "rationale": "Rome is in Italy [1].", "answer": "no"}

{"question": "Who directed Jaws?", "rationale": "Spielberg directed Jaws [1].", "answer": "Steven Spielberg", "steps": ["Who directed Jaws?"]}
{"question": "Where was the director of Jaws born?", "rationale": "He was born in Cincinnati [2].", "answer": "Cincinnati", "steps": ["Who directed Jaws?", "Where was he born?"]}
{"question": "Uncited?", "rationale": "No markers here.", "answer": "x"}
"#;

    #[test]
    fn only_bounded_regular_files_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("pool.jsonl");
        std::fs::write(&good, POOL).expect("write");
        assert_eq!(DemoPool::load(&good).expect("a pool file").demos.len(), 4);
        let err = DemoPool::load(dir.path()).expect_err("a folder");
        assert!(err.contains("not a regular file"), "{err}");
        #[cfg(unix)]
        {
            let err = DemoPool::load(std::path::Path::new("/dev/zero")).expect_err("a device");
            assert!(err.contains("not a regular file"), "{err}");
        }
        let big = dir.path().join("big.jsonl");
        let file = std::fs::File::create(&big).expect("create");
        file.set_len(MAX_POOL_BYTES + 1).expect("sparse file");
        let err = DemoPool::load(&big).expect_err("too big");
        assert!(err.contains("at most"), "{err}");
    }

    #[test]
    fn pool_is_parsed_and_filtered() {
        let pool = DemoPool::parse(POOL).expect("valid pool");
        assert_eq!(pool.demos.len(), 4);
        assert_eq!(pool.dropped, 1, "the uncited rationale fails the format filter");
        let err = DemoPool::parse("{\"question\": 1}").expect_err("malformed");
        assert!(err.starts_with("line 1"));
        assert!(DemoPool::parse("{\"question\":\"q\",\"rationale\":\"r [1]\",\"answer\":\"a\",\"extra\":1}").is_err());
    }

    #[test]
    fn over_long_steps_are_dropped_by_the_iqr_rule() {
        let demo = |steps: &[&str]| Demonstration {
            question: "q".into(),
            rationale: "r [1]".into(),
            answer: "a".into(),
            steps: steps.iter().map(|s| s.to_string()).collect(),
            passages: vec![],
        };
        let short = ["a b c", "a b c d", "a b c", "a b c d"];
        let demos = vec![demo(&short), demo(&short), demo(&["a b c d e f g h i j k l m n o p q r s t u v w x y z"])];
        // Lengths 3,4,3,4,3,4,3,4,26 → Q1 = 3, Q3 = 4, limit 5.5.
        assert_eq!(step_length_limit(&demos), 5.5);
        assert_eq!(step_length_limit(&demos[..0]), f64::INFINITY);
    }

    #[test]
    fn knn_and_balanced_selection() {
        let pool = DemoPool::parse(POOL).expect("valid pool");
        let picked = knn_lexical(&pool.questions(), "Who was the director of Jaws, and where was he born?", 2);
        assert_eq!(picked, vec![3, 2]);
        assert_eq!(knn_embedded(&[vec![1.0, 0.0], vec![0.6, 0.8], vec![0.0, 1.0]], &[0.0, 1.0], 2), vec![2, 1]);
        let b = balanced(&pool.demos, "any question", 3);
        let classes: BTreeSet<usize> = b.iter().map(|&i| answer_class(&pool.demos[i].answer)).collect();
        assert_eq!(classes.len(), 3, "one demo per class: {b:?}");
        assert_eq!(balanced(&pool.demos, "any question", 3), b, "reproducible");
        assert_eq!(balanced(&pool.demos, "q", 10).len(), 4, "never more than the pool");
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
    }

    /// The blocks come from the templates; the built-in ones give exactly this text.
    #[test]
    fn demonstration_blocks_are_rendered_from_the_templates() {
        let pool = DemoPool::parse(POOL).expect("valid pool");
        let prompts = hopwise_core::Prompts::default();
        let render = |name: &str, vars: &[(&str, &str)]| Ok(prompts.render(name, vars)?);
        assert_eq!(
            render_thoughts(&pool, &[2, 3], &render).expect("render"),
            "Solved examples:\n\nQuestion: Who directed Jaws?\nRationale: Spielberg directed Jaws [1].\n\
             Answer: Steven Spielberg\n\nQuestion: Where was the director of Jaws born?\nRationale: He was born in \
             Cincinnati [2].\nAnswer: Cincinnati\n\nNow the task.\n\n"
        );
        assert_eq!(
            render_plans(&pool, &[0, 3], &render).expect("render"),
            "Solved examples:\n\nQuestion: Where was the director of Jaws born?\nStep 1: Who directed Jaws?\n\
             Step 2: Where was he born?\n\nNow the task.\n\n",
            "only the demos with steps"
        );
        assert_eq!(render_plans(&pool, &[0], &render).expect("render"), "", "no steps, no plan block");
        let with_passages = DemoPool::parse(
            r#"{"question": "Q?", "rationale": "R [1].", "answer": "A", "passages": ["P one", "P two"]}"#,
        )
        .expect("valid pool");
        assert_eq!(
            render_thoughts(&with_passages, &[0], &render).expect("render"),
            "Solved examples:\n\nPassages:\n[1] P one\n[2] P two\nQuestion: Q?\nRationale: R [1].\nAnswer: A\n\nNow the task.\n\n"
        );
        let o = std::collections::BTreeMap::from([("hgot_demos".to_string(), "Beispiele:\n{examples}\n".to_string())]);
        let german = prompts.clone().with_overrides(&o).expect("valid override");
        let render = |name: &str, vars: &[(&str, &str)]| Ok(german.render(name, vars)?);
        assert!(render_thoughts(&pool, &[2], &render).expect("render").starts_with("Beispiele:\nQuestion: Who"));
    }
}
