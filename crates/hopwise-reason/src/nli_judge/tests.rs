use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{ChatResponse, Completion, Llm, Recorder};

use super::*;
use crate::meter::Meter;

/// A judge over `llm`, metered into `rec`.
fn judge(llm: impl Llm + 'static, rec: &Recorder) -> LlmNli {
    LlmNli::new(Arc::new(Meter::new(Arc::new(llm), rec.clone(), 1000)), Arc::new(Prompts::default()))
}

#[test]
fn parses_labels_robustly() {
    assert_eq!(parse_label("entail"), Some(NliLabel::Entailment));
    assert_eq!(parse_label("  Entailment."), Some(NliLabel::Entailment));
    assert_eq!(parse_label("Label: CONTRADICTION"), Some(NliLabel::Contradiction));
    assert_eq!(parse_label("neutral - B may be either"), Some(NliLabel::Neutral));
    assert_eq!(parse_label("A does not entail B"), Some(NliLabel::Neutral));
    assert_eq!(parse_label("A doesn't entail B"), Some(NliLabel::Neutral));
    assert_eq!(parse_label("contradict, it does not entail"), Some(NliLabel::Contradiction));
    assert_eq!(parse_label("yes"), None);
    assert_eq!(parse_label(""), None);
}

#[test]
fn logprobs_give_label_probabilities() {
    let ln = |p: f32| p.ln();
    let top = vec![
        ("ent".to_string(), ln(0.6)),
        (" Ent".to_string(), ln(0.1)),
        ("neutral".to_string(), ln(0.2)),
        ("contr".to_string(), ln(0.05)),
        ("the".to_string(), ln(0.05)),
    ];
    let v = verdict_from_logprobs(&top).expect("labels present");
    assert!((v.entailment - 0.7 / 0.95).abs() < 1e-5, "{v:?}");
    assert!((v.neutral - 0.2 / 0.95).abs() < 1e-5);
    assert!((v.contradiction - 0.05 / 0.95).abs() < 1e-5);
    assert!((v.entailment + v.neutral + v.contradiction - 1.0).abs() < 1e-5);
    assert!(verdict_from_logprobs(&[("the".into(), -0.1), ("e".into(), -0.1)]).is_none());
    assert!(verdict_from_logprobs(&[]).is_none());
}

struct LogprobJudge;

#[async_trait]
impl Llm for LogprobJudge {
    fn name(&self) -> &str {
        "logprob-judge"
    }
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        assert!(request.params.logprobs, "the judge asks for logprobs");
        let choice = Completion {
            text: "neutral".into(),
            finish_reason: None,
            top_logprobs: vec![("entail".into(), 0.8f32.ln()), ("neutral".into(), 0.2f32.ln())],
            token_logprobs: Vec::new(),
        };
        Ok(ChatResponse { choices: vec![choice], ..Default::default() })
    }
}

#[tokio::test]
async fn judge_prefers_logprobs_over_the_label() {
    let nli = judge(LogprobJudge, &Recorder::new("q", "uar"));
    let v = nli.judge("a", "b").await.expect("verdict");
    assert!((v.entailment - 0.8).abs() < 1e-5 && v.label() == NliLabel::Entailment);
}

#[tokio::test]
async fn judge_reads_the_label_and_caches_pairs() {
    let llm = ScriptedLlm::new().on("Hypothesis: Paris is in France", "Entail").on("Hypothesis:", "contradiction");
    let rec = Recorder::new("q", "uar");
    let nli = judge(llm.clone(), &rec);
    let v = nli.judge("Paris is the capital of France", "Paris is in France").await.expect("verdict");
    assert_eq!(v, NliVerdict::certain(NliLabel::Entailment));
    let again = nli.judge("Paris is the capital of France", "Paris is in France").await.expect("verdict");
    assert_eq!(again, v);
    let other = nli.judge("Paris is in France", "Paris is in Spain").await.expect("verdict");
    assert_eq!(other.label(), NliLabel::Contradiction);
    assert_eq!(nli.llm_calls(), 2, "the repeated pair came from the cache");
    assert_eq!(llm.calls().len(), 2);
    assert_eq!(rec.stats().llm_calls, 2, "judge calls are metered into the trace");
    assert!(llm.calls()[0].contains("Premise: Paris is the capital of France"));
}

/// Replies to a batch with a label per claim: entailment when the claim's words are in its
/// text (read back from the prompt), else neutral; claims whose number is over `answers` get none.
struct BatchJudge {
    answers: usize,
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl Llm for BatchJudge {
    fn name(&self) -> &str {
        "batch-judge"
    }
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        self.requests.lock().unwrap().push(request.clone());
        let prompt = &request.messages.last().expect("a prompt").content;
        let Some(claims) = prompt.split("Claims:\n").nth(1) else {
            // A lone pair, asked with the one-pair template.
            let choice = Completion { text: "entailment".into(), ..Default::default() };
            return Ok(ChatResponse { choices: vec![choice], ..Default::default() });
        };
        let claims = claims.split("\n\n").next().unwrap_or("");
        let labels: Vec<String> = claims
            .lines()
            .filter_map(|line| {
                let (number, rest) = line.split_once(". (text ")?;
                let (letter, claim) = rest.split_once(") ")?;
                let text = prompt.split(&format!("Text {letter}:\n")).nth(1)?.split("\n\n").next()?;
                let label = if text.contains(claim) { "entailment" } else { "neutral" };
                (number.parse::<usize>().ok()? <= self.answers).then(|| format!("\"{number}\":\"{label}\""))
            })
            .collect();
        let choice = Completion { text: format!("{{{}}}", labels.join(",")), ..Default::default() };
        Ok(ChatResponse { choices: vec![choice], ..Default::default() })
    }
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(p, h)| (p.to_string(), h.to_string())).collect()
}

#[tokio::test]
async fn several_pairs_are_judged_in_one_constrained_request_and_cached() {
    let llm = Arc::new(BatchJudge { answers: usize::MAX, requests: Mutex::new(Vec::new()) });
    let rec = Recorder::new("q", "hgot");
    let nli = LlmNli::new(Arc::new(Meter::new(llm.clone(), rec.clone(), 1000)), Arc::new(Prompts::default()));
    let asked = pairs(&[
        ("Paris is the capital of France.", "the capital of France"),
        ("Rome is in Italy.", "Rome is in Spain"),
        ("Paris is the capital of France.", "the capital of France"),
        ("Rome is in Italy.", "in Italy"),
    ]);
    let verdicts: Vec<NliLabel> =
        nli.judge_all(&asked).await.into_iter().map(|v| v.expect("verdict").label()).collect();
    assert_eq!(verdicts, [NliLabel::Entailment, NliLabel::Neutral, NliLabel::Entailment, NliLabel::Entailment]);
    {
        let requests = llm.requests.lock().unwrap();
        assert_eq!(requests.len(), 1, "one request for the three distinct pairs");
        assert_eq!(requests[0].params.grammar.as_deref(), Some(batch::grammar(3).as_str()));
        assert_eq!(requests[0].params.response_schema, Some(batch::json_schema(3)));
    }
    assert_eq!(nli.judge("Rome is in Italy.", "in Italy").await.expect("cached").label(), NliLabel::Entailment);
    assert_eq!(nli.llm_calls(), 1, "judged pairs come from the cache");
    assert_eq!(rec.stats().llm_calls, 1, "the request is metered");
}

#[tokio::test]
async fn a_claim_the_batch_reply_leaves_out_is_an_error_for_that_pair_alone() {
    let llm = Arc::new(BatchJudge { answers: 1, requests: Mutex::new(Vec::new()) });
    let nli =
        LlmNli::new(Arc::new(Meter::new(llm.clone(), Recorder::new("q", "hgot"), 1000)), Arc::new(Prompts::default()));
    let verdicts = nli.judge_all(&pairs(&[("A b.", "A b."), ("C d.", "E f.")])).await;
    assert_eq!(verdicts[0].as_ref().expect("labelled").label(), NliLabel::Entailment);
    assert_eq!(verdicts[1].as_ref().expect_err("left out").backend_kind(), Some(BackendErrorKind::Malformed));
}

#[tokio::test]
async fn more_pairs_than_a_request_holds_go_in_several_and_a_lone_one_alone() {
    let llm = Arc::new(BatchJudge { answers: usize::MAX, requests: Mutex::new(Vec::new()) });
    let rec = Recorder::new("q", "hgot");
    let nli = LlmNli::new(Arc::new(Meter::new(llm.clone(), rec.clone(), 1000)), Arc::new(Prompts::default()));
    let asked: Vec<(String, String)> =
        (0..=batch::MAX_PAIRS).map(|i| (format!("Text number {i}."), format!("number {i}"))).collect();
    let verdicts = nli.judge_all(&asked).await;
    assert!(verdicts.iter().all(|v| v.as_ref().is_ok_and(|v| v.label() == NliLabel::Entailment)));
    let requests = llm.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    let grammars: Vec<bool> = requests.iter().map(|r| r.params.grammar.is_some()).collect();
    assert_eq!(grammars.iter().filter(|g| **g).count(), 1, "one batch of {}, one lone pair", batch::MAX_PAIRS);
    let purposes: Vec<String> = rec
        .snapshot()
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            hopwise_core::EventKind::LlmCall { purpose, .. } => Some(purpose.clone()),
            _ => None,
        })
        .collect();
    let mut purposes = purposes;
    purposes.sort();
    assert_eq!(purposes, ["nli_judge", "nli_judge_batch"]);
}

#[tokio::test]
async fn a_failed_batch_request_is_an_error_of_its_kind_for_each_of_its_pairs() {
    struct Down;
    #[async_trait]
    impl Llm for Down {
        fn name(&self) -> &str {
            "down"
        }
        async fn chat(&self, _: &ChatRequest) -> Result<ChatResponse> {
            Err(Error::backend("down", BackendErrorKind::Connection, "refused"))
        }
    }
    let nli = judge(Down, &Recorder::new("q", "hgot"));
    let verdicts = nli.judge_all(&pairs(&[("A b.", "A b."), ("C d.", "E f.")])).await;
    for v in verdicts {
        assert_eq!(v.expect_err("down").backend_kind(), Some(BackendErrorKind::Connection));
    }
}

#[tokio::test]
async fn unreadable_reply_is_a_malformed_backend_error() {
    let nli = judge(ScriptedLlm::new().fallback("I cannot say"), &Recorder::new("q", "uar"));
    let err = nli.judge("a", "b").await.expect_err("no label");
    assert_eq!(err.backend_kind(), Some(BackendErrorKind::Malformed));
}

#[tokio::test]
async fn entailment_matrix_skips_identical_and_empty_texts() {
    // "x" and "y" entail each other; "z" is neutral to both.
    let llm = ScriptedLlm::new()
        .on_fn("Premise: z", |_, _| "neutral".into())
        .on_fn("Hypothesis: z", |_, _| "neutral".into())
        .fallback("entail");
    let nli = judge(llm.clone(), &Recorder::new("q", "uar"));
    let texts: Vec<String> = ["x", "x ", "y", "z", ""].iter().map(|s| s.to_string()).collect();
    let m = entailment_matrix(&nli, &texts).await.expect("matrix");
    assert_eq!(m.judgements, 6, "3 distinct non-empty texts give 6 ordered pairs");
    assert_eq!(llm.calls().len(), 6);
    assert_eq!(m.entail.get(0, 1), 1.0, "identical after trimming");
    assert_eq!(m.entail.get(0, 2), 1.0);
    assert_eq!(m.entail.get(0, 3), 0.0);
    assert_eq!(m.entail.get(0, 4), 0.0, "empty is never entailed by a non-empty text");
    assert_eq!(m.entail.get(4, 4), 1.0);
    assert!(m.mutual[1][2] && m.mutual[2][1]);
    assert!(!m.mutual[2][3] && !m.mutual[3][4]);
    let sets = crate::uncertainty::num_semantic_sets(5, |i, j| m.mutual[i][j]);
    assert_eq!(sets, 3, "{{x, x, y}}, {{z}}, {{empty}}");
}
