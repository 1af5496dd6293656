//! Natural-language inference with the chat model as the judge (no NLI cross-encoder ships on
//! these machines), plus the pairwise entailment matrix the uncertainty estimators read.
//!
//! The judge asks for one label (`nli_judge` template). Label probabilities come from the first
//! token's `top_logprobs` when the backend reports them (a softmax over the three labels' tokens);
//! otherwise the parsed label is taken as certain. Judgements are cached per judge instance, keyed
//! by the exact pair; a question's context makes one judge (`Ctx::nli`), so it never asks twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hopwise_core::{
    BackendErrorKind, ChatMessage, ChatRequest, Error, GenParams, MeteredModel, Nli, NliLabel, NliVerdict, Prompts,
    Result,
};

use crate::uncertainty::Matrix;

pub mod batch;

/// Pairs kept before the cache is cleared (bounds memory when one judge serves many questions).
const CACHE_CAPACITY: usize = 4096;

/// An [`Nli`] backed by a chat model, called through one question's metered model (so every judgement
/// shows in that question's trace and counts against its budgets).
pub struct LlmNli {
    model: Arc<dyn MeteredModel>,
    prompts: Arc<Prompts>,
    name: String,
    cache: Mutex<HashMap<(String, String), NliVerdict>>,
    llm_calls: AtomicU64,
}

impl LlmNli {
    pub fn new(model: Arc<dyn MeteredModel>, prompts: Arc<Prompts>) -> Self {
        let name = format!("llm-judge:{}", model.name());
        Self { model, prompts, name, cache: Mutex::new(HashMap::new()), llm_calls: AtomicU64::new(0) }
    }

    /// Model calls made so far (cache hits excluded).
    pub fn llm_calls(&self) -> u64 {
        self.llm_calls.load(Ordering::SeqCst)
    }

    fn cached(&self, key: &(String, String)) -> Option<NliVerdict> {
        self.cache.lock().ok().and_then(|c| c.get(key).copied())
    }

    fn remember(&self, key: (String, String), verdict: NliVerdict) {
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_CAPACITY {
                c.clear();
            }
            c.insert(key, verdict);
        }
    }
}

#[async_trait]
impl Nli for LlmNli {
    fn name(&self) -> &str {
        &self.name
    }

    async fn judge(&self, premise: &str, hypothesis: &str) -> Result<NliVerdict> {
        let key = (premise.to_string(), hypothesis.to_string());
        if let Some(v) = self.cached(&key) {
            return Ok(v);
        }
        let prompt = self.prompts.render("nli_judge", &[("premise", premise), ("hypothesis", hypothesis)])?;
        let mut messages = Vec::with_capacity(2);
        if let Some(system) = self.prompts.template("system").filter(|s| !s.trim().is_empty()) {
            messages.push(ChatMessage::system(system));
        }
        messages.push(ChatMessage::user(prompt));
        let params =
            GenParams { temperature: 0.0, top_p: 1.0, max_tokens: 8, n: 1, logprobs: true, ..GenParams::default() };
        self.llm_calls.fetch_add(1, Ordering::SeqCst);
        let response = self.model.send("nli_judge", None, ChatRequest::new(messages, params)).await?;
        let choice = response.choices.first();
        let verdict = choice
            .and_then(|c| verdict_from_logprobs(&c.top_logprobs))
            .or_else(|| choice.and_then(|c| parse_label(&c.text)).map(NliVerdict::certain))
            .ok_or_else(|| {
                Error::backend(
                    &self.name,
                    BackendErrorKind::Malformed,
                    format!("no NLI label in the judge's reply {:?}", response.text()),
                )
            })?;
        self.remember(key, verdict);
        Ok(verdict)
    }

    /// Pairs not judged before go in requests of up to [`batch::MAX_PAIRS`] (`nli_judge_batch`,
    /// grammar-constrained); a lone pair goes through [`Nli::judge`], which reads label
    /// probabilities. A label the reply lacks is an error for that pair alone.
    async fn judge_all(&self, pairs: &[(String, String)]) -> Vec<Result<NliVerdict>> {
        let mut verdicts: Vec<Option<std::result::Result<NliVerdict, String>>> =
            pairs.iter().map(|pair| self.cached(pair).map(Ok)).collect();
        let mut open: Vec<usize> = Vec::new();
        for (i, pair) in pairs.iter().enumerate() {
            if verdicts[i].is_none() && !open.iter().any(|&j| pairs[j] == *pair) {
                open.push(i);
            }
        }
        for chunk in open.chunks(batch::MAX_PAIRS) {
            if let [i] = chunk {
                verdicts[*i] = Some(self.judge(&pairs[*i].0, &pairs[*i].1).await.map_err(|e| e.to_string()));
                continue;
            }
            let asked: Vec<(String, String)> = chunk.iter().map(|&i| pairs[i].clone()).collect();
            match self.ask_batch(&asked).await {
                Ok(labels) => {
                    for (&i, label) in chunk.iter().zip(labels) {
                        let verdict = label.map(NliVerdict::certain);
                        if let Some(v) = verdict {
                            self.remember(pairs[i].clone(), v);
                        }
                        verdicts[i] =
                            Some(verdict.ok_or_else(|| "the judge's reply gave this claim no label".to_string()));
                    }
                }
                Err(e) => {
                    for &i in chunk {
                        verdicts[i] = Some(Err(e.to_string()));
                    }
                }
            }
        }
        (0..pairs.len())
            .map(|i| {
                // A repeated pair takes the verdict of its first occurrence.
                let first = pairs.iter().position(|p| *p == pairs[i]).unwrap_or(i);
                match verdicts[i].clone().or_else(|| verdicts[first].clone()) {
                    Some(Ok(v)) => Ok(v),
                    Some(Err(e)) => Err(Error::backend(&self.name, BackendErrorKind::Malformed, e)),
                    None => Err(Error::backend(&self.name, BackendErrorKind::Malformed, "the pair was not judged")),
                }
            })
            .collect()
    }
}

impl LlmNli {
    /// One `nli_judge_batch` request for `pairs`: a label per pair, in order.
    async fn ask_batch(&self, pairs: &[(String, String)]) -> Result<Vec<Option<NliLabel>>> {
        let (texts, claims) = batch::render(pairs);
        let prompt = self.prompts.render("nli_judge_batch", &[("texts", &texts), ("claims", &claims)])?;
        let mut messages = Vec::with_capacity(2);
        if let Some(system) = self.prompts.template("system").filter(|s| !s.trim().is_empty()) {
            messages.push(ChatMessage::system(system));
        }
        messages.push(ChatMessage::user(prompt));
        let params = GenParams {
            temperature: 0.0,
            top_p: 1.0,
            max_tokens: 12 * pairs.len() as u32 + 8,
            n: 1,
            grammar: Some(batch::grammar(pairs.len())),
            response_schema: Some(batch::json_schema(pairs.len())),
            ..GenParams::default()
        };
        self.llm_calls.fetch_add(1, Ordering::SeqCst);
        let response = self.model.send("nli_judge", None, ChatRequest::new(messages, params)).await?;
        Ok(batch::read_labels(response.text(), pairs.len()))
    }
}

/// The first label named in `text` (`entail…`, `contradict…`, `neutral`), case-insensitive.
/// A negated entailment ("does not entail", "doesn't entail") reads as neutral.
pub fn parse_label(text: &str) -> Option<NliLabel> {
    let lower = text.to_lowercase();
    let stems =
        [("entail", NliLabel::Entailment), ("contradict", NliLabel::Contradiction), ("neutral", NliLabel::Neutral)];
    let (pos, label) =
        stems.iter().filter_map(|(stem, label)| lower.find(stem).map(|p| (p, *label))).min_by_key(|(p, _)| *p)?;
    if label == NliLabel::Entailment {
        let before = lower[..pos].trim_end();
        if before.ends_with("not") || before.ends_with("n't") || before.ends_with("no") {
            return Some(NliLabel::Neutral);
        }
    }
    Some(label)
}

/// Label probabilities from the first token's candidates: each candidate that starts one of the
/// label words (at least two letters, e.g. `ent`, ` Neutral`, `contr`) adds its probability to that
/// label; the three totals are renormalised. `None` when no candidate names a label.
pub fn verdict_from_logprobs(top: &[(String, f32)]) -> Option<NliVerdict> {
    const LABELS: [(&str, NliLabel); 3] =
        [("entail", NliLabel::Entailment), ("contradict", NliLabel::Contradiction), ("neutral", NliLabel::Neutral)];
    let mut mass = [0f64; 3];
    for (token, logprob) in top {
        let word = token.trim_matches(|c: char| !c.is_alphabetic()).to_lowercase();
        if word.len() < 2 || !logprob.is_finite() {
            continue;
        }
        if let Some(k) = LABELS.iter().position(|(label, _)| label.starts_with(&word) || word.starts_with(label)) {
            mass[k] += f64::from(*logprob).exp();
        }
    }
    let total: f64 = mass.iter().sum();
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    Some(NliVerdict {
        entailment: (mass[0] / total) as f32,
        contradiction: (mass[1] / total) as f32,
        neutral: (mass[2] / total) as f32,
    })
}

/// Pairwise entailment among responses: `entail.get(i, j)` is p(response `i` entails `j`), and
/// `mutual[i][j]` says whether the labels are entailment both ways (the Semantic Sets relation).
#[derive(Debug, Clone)]
pub struct EntailmentMatrix {
    pub entail: Matrix,
    pub mutual: Vec<Vec<bool>>,
    /// Directional judgements asked of the judge (identical and empty texts are not asked).
    pub judgements: u64,
}

/// Judges every ordered pair of distinct responses. Identical texts (after trimming) entail each
/// other without asking; an empty response entails nothing and is entailed by nothing but another
/// empty one. Each distinct text pair is asked once, however often it repeats among the samples.
pub async fn entailment_matrix(nli: &dyn Nli, texts: &[String]) -> Result<EntailmentMatrix> {
    let n = texts.len();
    let trimmed: Vec<&str> = texts.iter().map(|t| t.trim()).collect();
    let mut distinct: Vec<&str> = Vec::new();
    let class: Vec<usize> = trimmed
        .iter()
        .map(|t| match distinct.iter().position(|d| d == t) {
            Some(k) => k,
            None => {
                distinct.push(t);
                distinct.len() - 1
            }
        })
        .collect();
    let m = distinct.len();
    let asks: Vec<(usize, usize)> = (0..m)
        .flat_map(|a| (0..m).map(move |b| (a, b)))
        .filter(|&(a, b)| a != b && !distinct[a].is_empty() && !distinct[b].is_empty())
        .collect();
    let verdicts =
        futures::future::try_join_all(asks.iter().map(|&(a, b)| nli.judge(distinct[a], distinct[b]))).await?;
    let mut table: HashMap<(usize, usize), NliVerdict> = asks.iter().copied().zip(verdicts).collect();
    for a in 0..m {
        table.insert((a, a), NliVerdict::certain(NliLabel::Entailment));
    }
    let lookup = |i: usize, j: usize| table.get(&(class[i], class[j])).copied();
    let entails = |i: usize, j: usize| lookup(i, j).is_some_and(|v| v.label() == NliLabel::Entailment);
    let mut entail = Matrix::identity(n);
    for i in 0..n {
        for j in 0..n {
            entail.set(i, j, lookup(i, j).map_or(0.0, |v| f64::from(v.entailment)));
        }
    }
    let mutual = (0..n).map(|i| (0..n).map(|j| entails(i, j) && entails(j, i)).collect()).collect();
    Ok(EntailmentMatrix { entail, mutual, judgements: asks.len() as u64 })
}

#[cfg(test)]
mod tests {
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
            let claims = prompt.split("Claims:\n").nth(1).expect("claims").split("\n\n").next().unwrap_or("");
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
        let nli = LlmNli::new(
            Arc::new(Meter::new(llm.clone(), Recorder::new("q", "hgot"), 1000)),
            Arc::new(Prompts::default()),
        );
        let verdicts = nli.judge_all(&pairs(&[("A b.", "A b."), ("C d.", "E f.")])).await;
        assert_eq!(verdicts[0].as_ref().expect("labelled").label(), NliLabel::Entailment);
        assert_eq!(verdicts[1].as_ref().expect_err("left out").backend_kind(), Some(BackendErrorKind::Malformed));
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
}
