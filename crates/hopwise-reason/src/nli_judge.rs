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
        let messages = self.messages(prompt);
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

    /// Pairs not judged before go in concurrent requests of up to [`batch::MAX_PAIRS`]
    /// (`nli_judge_batch`, grammar-constrained), whose verdicts are labels taken as certain; a
    /// request left with a lone pair goes through [`Nli::judge`], which reads label probabilities.
    /// A label the reply lacks is an error for that pair alone.
    async fn judge_all(&self, pairs: &[(String, String)]) -> Vec<Result<NliVerdict>> {
        type Judged = std::result::Result<NliVerdict, (BackendErrorKind, String)>;
        let failed = |e: Error| (e.backend_kind().unwrap_or(BackendErrorKind::Malformed), e.to_string());
        let mut open: Vec<usize> = Vec::new();
        for (i, pair) in pairs.iter().enumerate() {
            if self.cached(pair).is_none() && !open.iter().any(|&j| pairs[j] == *pair) {
                open.push(i);
            }
        }
        let chunks = open.chunks(batch::MAX_PAIRS).map(|chunk| async move {
            if let [i] = chunk {
                return vec![(*i, self.judge(&pairs[*i].0, &pairs[*i].1).await.map_err(failed))];
            }
            let asked: Vec<(String, String)> = chunk.iter().map(|&i| pairs[i].clone()).collect();
            match self.ask_batch(&asked).await {
                Ok(labels) => chunk
                    .iter()
                    .zip(labels)
                    .map(|(&i, label)| {
                        let verdict = label.map(NliVerdict::certain);
                        if let Some(v) = verdict {
                            self.remember(pairs[i].clone(), v);
                        }
                        let missing =
                            || (BackendErrorKind::Malformed, "the judge's reply gave this claim no label".into());
                        (i, verdict.ok_or_else(missing))
                    })
                    .collect(),
                Err(e) => {
                    let (kind, message) = failed(e);
                    chunk.iter().map(|&i| (i, Err((kind, message.clone())))).collect::<Vec<(usize, Judged)>>()
                }
            }
        });
        let judged: Vec<(usize, Judged)> = futures::future::join_all(chunks).await.into_iter().flatten().collect();
        pairs
            .iter()
            .map(|pair| {
                // A repeated pair takes the verdict of its first occurrence.
                let asked = judged.iter().find(|(i, _)| pairs[*i] == *pair).map(|(_, v)| v.clone());
                match asked.or_else(|| self.cached(pair).map(Ok)) {
                    Some(Ok(v)) => Ok(v),
                    Some(Err((kind, message))) => Err(Error::backend(&self.name, kind, message)),
                    None => Err(Error::backend(&self.name, BackendErrorKind::Malformed, "the pair was not judged")),
                }
            })
            .collect()
    }
}

impl LlmNli {
    /// The judge's messages: the configured system turn, if any, then `prompt`.
    fn messages(&self, prompt: String) -> Vec<ChatMessage> {
        let system = self.prompts.template("system").filter(|s| !s.trim().is_empty()).map(ChatMessage::system);
        system.into_iter().chain([ChatMessage::user(prompt)]).collect()
    }

    /// One `nli_judge_batch` request for `pairs`: a label per pair, in order.
    async fn ask_batch(&self, pairs: &[(String, String)]) -> Result<Vec<Option<NliLabel>>> {
        let (texts, claims) = batch::render(pairs, &self.prompts)?;
        let prompt = self.prompts.render("nli_judge_batch", &[("texts", &texts), ("claims", &claims)])?;
        let messages = self.messages(prompt);
        let params = GenParams {
            temperature: 0.0,
            top_p: 1.0,
            max_tokens: batch::reply_tokens(pairs.len()),
            n: 1,
            grammar: Some(batch::grammar(pairs.len())),
            response_schema: Some(batch::json_schema(pairs.len())),
            ..GenParams::default()
        };
        self.llm_calls.fetch_add(1, Ordering::SeqCst);
        let response = self.model.send("nli_judge_batch", None, ChatRequest::new(messages, params)).await?;
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
mod tests;
