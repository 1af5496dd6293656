use async_trait::async_trait;
use hopwise_core::{BackendErrorKind, Error, NliVerdict};
use proptest::prelude::*;

use super::*;

/// Entails when every word of the hypothesis longer than three letters occurs in the premise.
pub(crate) struct WordNli;

#[async_trait]
impl Nli for WordNli {
    fn name(&self) -> &str {
        "words"
    }
    async fn judge(&self, premise: &str, hypothesis: &str) -> hopwise_core::Result<NliVerdict> {
        let p = premise.to_lowercase();
        let entailed = hypothesis
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
            .filter(|w| w.len() > 3)
            .all(|w| p.contains(&w));
        Ok(NliVerdict::certain(if entailed { NliLabel::Entailment } else { NliLabel::Neutral }))
    }
}

struct DownNli;

#[async_trait]
impl Nli for DownNli {
    fn name(&self) -> &str {
        "down"
    }
    async fn judge(&self, _: &str, _: &str) -> hopwise_core::Result<NliVerdict> {
        Err(Error::backend("down", BackendErrorKind::Connection, "refused"))
    }
}

fn passage(text: &str) -> Passage {
    Passage { id: text.to_string(), text: text.to_string(), ..Default::default() }
}

fn judge(limit: u64) -> (Judge, Recorder) {
    let rec = Recorder::new("q", "hgot");
    (Judge::new(Arc::new(WordNli), rec.clone(), limit, false), rec)
}

#[test]
fn thoughts_are_read_from_the_protocol() {
    let t = parse_thought("Rationale: Jaws was directed by Spielberg [1]. He was born in Ohio [2].\nAnswer: Ohio.");
    assert_eq!(t.rationale, "Jaws was directed by Spielberg [1]. He was born in Ohio [2].");
    assert_eq!(t.answer, "Ohio");
    let inline = parse_thought("**Rationale:** A is B [1]. Final Answer: \"Cincinnati, Ohio\" [1]");
    assert_eq!((inline.rationale.as_str(), inline.answer.as_str()), ("A is B [1].", "Cincinnati, Ohio"));
    let marker = parse_thought("X is Y [2]. So the answer is: Y.");
    assert_eq!(marker.answer, "Y");
    let nothing = parse_thought("I am not sure about any of this");
    assert_eq!(nothing.answer, "", "no answer label: the sample abstains");
    assert_eq!(parse_thought("Answer:\n\nBob").answer, "Bob");
    assert_eq!(parse_thought("").answer, "");
    // Non-ASCII before the label must not shift byte offsets.
    assert_eq!(parse_thought("İstanbul é [1]. ANSWER: İzmir").answer, "İzmir");
}

#[test]
fn statements_keep_their_markers() {
    let s = split_statements("Paris is in France [1]. It has 2 million people [2][3].\nIt is old [1, 3]. [4]");
    assert_eq!(s.len(), 3);
    assert_eq!(s[0], Statement { claim: "Paris is in France.".into(), citations: vec![1] });
    assert_eq!(s[1].citations, vec![2, 3]);
    assert_eq!(s[2].citations, vec![1, 3, 4], "a marker after the full stop belongs to the sentence before it");
    assert_eq!(split_statements("[2]\nA b [1].").len(), 1, "a marker-only line is no statement");
    let (text, n) = take_markers("See [a] and [1,1] [x2]");
    assert_eq!(text, "See [a] and [x2]");
    assert_eq!(n, vec![1]);
    assert!(split_statements("").is_empty());
}

#[tokio::test]
async fn recall_and_precision_by_hand() {
    let passages = vec![
        passage("Jaws was directed by Steven Spielberg."),
        passage("Steven Spielberg was born in Cincinnati."),
        passage("Sharks live in oceans."),
    ];
    let (j, rec) = judge(100);
    // s1: cites [1] alone, entailed → supported, 1/1 relevant.
    // s2: cites [2][3]; [2] alone entails, [3] neither alone nor needed → supported, 1 of 2 relevant.
    // s3: cites [3] which does not entail → unsupported, 0 of 1 relevant.
    // s4: no citation → unsupported, no NLI call.
    let rationale = "Jaws was directed by Spielberg [1]. Spielberg was born in Cincinnati [2][3]. \
                     Spielberg likes boats [3]. Cincinnati is in Ohio.";
    let s = score_citations(rationale, &passages, &j, false).await;
    assert_eq!(s.statements.len(), 4);
    assert_eq!(s.statements.iter().map(|x| x.supported).collect::<Vec<_>>(), vec![true, true, false, false]);
    assert_eq!(s.statements[1].relevant, vec![true, false]);
    assert!((s.recall - 0.5).abs() < 1e-12, "2 of 4 statements supported");
    assert!((s.precision - 0.5).abs() < 1e-12, "2 of 4 citations relevant");
    assert_eq!(s.support, vec![1, 1, 2], "δ̂ by marker");
    // Calls: s1 joint; s2 joint, [2] single, [3] single, rest-without-[3] = [2] (cached); s3 joint.
    assert_eq!(j.calls(), 5);
    assert_eq!(rec.stats().nli_calls, 5);
}

#[tokio::test]
async fn removing_a_needed_citation_breaks_support() {
    // Neither passage alone entails "Spielberg directed Jaws in Cincinnati"; together they do.
    let passages = vec![passage("Spielberg directed Jaws."), passage("It was filmed in Cincinnati.")];
    let (j, _) = judge(100);
    let s = score_citations("Spielberg directed Jaws in Cincinnati [1][2].", &passages, &j, false).await;
    assert_eq!(s.recall, 1.0);
    assert_eq!(s.statements[0].relevant, vec![true, true]);
    assert_eq!(s.precision, 1.0);
}

#[tokio::test]
async fn rationales_without_citations_cost_no_nli() {
    let (j, rec) = judge(100);
    let s = score_citations("Paris is in France. It is big.", &[passage("Paris is in France.")], &j, false).await;
    assert_eq!((s.recall, s.precision), (0.0, 0.0));
    assert_eq!(j.calls(), 0);
    assert_eq!(rec.stats().nli_calls, 0);
    let empty = score_citations("", &[], &j, false).await;
    assert_eq!((empty.recall, empty.precision, empty.statements.len()), (0.0, 0.0, 0));
}

#[tokio::test]
async fn dangling_citations_make_a_statement_unsupported() {
    let (j, _) = judge(100);
    let s = score_citations(
        "Paris is in France [1][7]. Rome is in Italy [0].",
        &[passage("Paris is in France.")],
        &j,
        false,
    )
    .await;
    assert_eq!(s.statements[0].dangling, vec![7]);
    assert!(!s.statements[0].supported, "ALCE: a citation out of range voids the statement");
    assert_eq!(s.statements[1].dangling, vec![0]);
    assert_eq!(s.precision, 0.0);
    assert_eq!(s.support, vec![1], "the valid marker still counts for δ̂");
    assert_eq!(j.calls(), 0);
}

#[tokio::test]
async fn uncited_entailment_and_caps() {
    let passages = vec![passage("Paris is in France."), passage("Paris is the capital of France.")];
    let (j, rec) = judge(2);
    let s = score_citations("Paris is in France [1].", &passages, &j, true).await;
    assert_eq!(s.support, vec![1, 1], "passage 2 entails the statement without being cited");
    assert_eq!(j.calls(), 2);
    // The cap is reached: a new judgement is refused and noted.
    let t = score_citations("Paris is the capital of France [2].", &passages, &j, false).await;
    assert!(!t.statements[0].supported);
    assert_eq!(rec.stats().nli_calls, 2);
    assert!(rec.snapshot().notes.iter().any(|n| n.contains("max_nli_calls")));
    let many = split_statements("A b c [1][2][3][4][5].");
    assert_eq!(many[0].citations.len(), 5);
    let (j2, _) = judge(100);
    let scored = score_citations("A b c [1][2][3][4][5].", &passages, &j2, false).await;
    assert_eq!(scored.statements[0].citations, vec![1, 2, 3], "ALCE scores the first three");
}

#[tokio::test]
async fn a_failing_judge_counts_as_unsupported_and_is_noted_once() {
    let rec = Recorder::new("q", "hgot");
    let j = Judge::new(Arc::new(DownNli), rec.clone(), 10, false);
    let s = score_citations("A is B [1]. C is D [1].", &[passage("A is B. C is D.")], &j, false).await;
    assert_eq!(s.recall, 0.0);
    assert_eq!(rec.snapshot().notes.iter().filter(|n| n.contains("failed")).count(), 1);
}

proptest! {
    #[test]
    fn thought_parsing_never_panics(reply in "(?s).{0,200}") {
        let t = parse_thought(&reply);
        prop_assert!(!t.answer.contains('\n'));
        for s in split_statements(&t.rationale) {
            prop_assert!(!s.claim.is_empty());
        }
    }
}

/// `WordNli` that takes a moment per judgement and counts the calls and how many ran at once.
#[derive(Default)]
struct SlowCountingNli {
    calls: std::sync::atomic::AtomicUsize,
    running: std::sync::atomic::AtomicUsize,
    most_at_once: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl Nli for SlowCountingNli {
    fn name(&self) -> &str {
        "slow-words"
    }
    async fn judge(&self, premise: &str, hypothesis: &str) -> hopwise_core::Result<NliVerdict> {
        use std::sync::atomic::Ordering::SeqCst;
        self.calls.fetch_add(1, SeqCst);
        let now = self.running.fetch_add(1, SeqCst) + 1;
        self.most_at_once.fetch_max(now, SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        self.running.fetch_sub(1, SeqCst);
        WordNli.judge(premise, hypothesis).await
    }
}

/// ALCE's rules applied one statement at a time, each judgement asked on its own: the reference the
/// rounds of [`score_all`] must agree with when no cap is reached.
async fn score_one_statement_at_a_time(
    rationale: &str,
    passages: &[Passage],
    nli: &dyn Nli,
    uncited: bool,
) -> CitationScore {
    let entails = |premise: String, claim: String| async move {
        nli.judge(&premise, &claim).await.is_ok_and(|v| v.label() == NliLabel::Entailment)
    };
    let joined = |numbers: &[usize]| numbers.iter().map(|&n| premise(&passages[n - 1])).collect::<Vec<_>>().join("\n");
    let mut out = CitationScore { support: vec![0; passages.len()], ..Default::default() };
    let (mut supported_count, mut citations, mut relevant_count) = (0, 0, 0);
    for statement in split_statements(rationale) {
        let capped: Vec<usize> = statement.citations.iter().copied().take(MAX_CITATIONS).collect();
        let (valid, dangling): (Vec<usize>, Vec<usize>) =
            capped.iter().partition(|&&n| (1..=passages.len()).contains(&n));
        citations += capped.len();
        for &n in &valid {
            out.support[n - 1] += 1;
        }
        for n in (1..=passages.len()).filter(|n| uncited && !valid.contains(n)) {
            if entails(joined(&[n]), statement.claim.clone()).await {
                out.support[n - 1] += 1;
            }
        }
        let supported =
            !valid.is_empty() && dangling.is_empty() && entails(joined(&valid), statement.claim.clone()).await;
        let mut relevant = vec![false; capped.len()];
        if supported {
            supported_count += 1;
            for (k, &n) in capped.iter().enumerate() {
                let others: Vec<usize> = capped.iter().copied().filter(|&m| m != n).collect();
                relevant[k] = capped.len() == 1
                    || entails(joined(&[n]), statement.claim.clone()).await
                    || !entails(joined(&others), statement.claim.clone()).await;
            }
        }
        relevant_count += relevant.iter().filter(|r| **r).count();
        out.statements.push(StatementScore {
            claim: statement.claim,
            citations: capped,
            dangling,
            supported,
            relevant,
        });
    }
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    out.recall = ratio(supported_count, out.statements.len());
    out.precision = ratio(relevant_count, citations);
    out
}

const JAWS: [&str; 3] =
    ["Jaws was directed by Steven Spielberg", "Spielberg was born in Cincinnati, Ohio", "Ohio is a state"];
const RATIONALES: [&str; 6] = [
    "Jaws was directed by Spielberg [1]. Spielberg was born in Cincinnati [2].",
    "Jaws was directed by Spielberg [1]. Spielberg was born in Cincinnati [2].",
    "Jaws was directed by Spielberg [1][3]. He was born in Ohio [2][3].",
    "Spielberg was born in Cincinnati [2][1]. Ohio is a state [4].",
    "Jaws was directed by Spielberg in Ohio [1][2][3].",
    "No citation here.",
];

#[tokio::test]
async fn a_vote_scored_together_matches_each_statement_scored_alone_and_asks_each_pair_once() {
    use std::sync::atomic::Ordering::SeqCst;
    let passages = JAWS.map(passage);
    for uncited in [false, true] {
        let reference = SlowCountingNli::default();
        let mut expected = Vec::new();
        for r in RATIONALES {
            expected.push(score_one_statement_at_a_time(r, &passages, &reference, uncited).await);
        }
        let together = Arc::new(SlowCountingNli::default());
        let rec = Recorder::new("q", "hgot");
        let judge = Judge::new(together.clone(), rec.clone(), 300, false);
        assert_eq!(score_all(&RATIONALES, &passages, &judge, uncited).await, expected, "uncited = {uncited}");
        let distinct = judge.calls();
        assert!(distinct < reference.calls.load(SeqCst) as u64, "repeated pairs are asked once");
        assert_eq!(together.calls.load(SeqCst) as u64, distinct);
        assert_eq!(rec.snapshot().stats.nli_calls, distinct);
        assert!(together.most_at_once.load(SeqCst) > 1, "a round's judgements overlap");
    }
}

/// `WordNli` that also judges several pairs in one request, counting requests and pairs.
#[derive(Default)]
struct BatchingNli {
    requests: std::sync::atomic::AtomicUsize,
    pairs: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl Nli for BatchingNli {
    fn name(&self) -> &str {
        "batching-words"
    }
    async fn judge(&self, premise: &str, hypothesis: &str) -> hopwise_core::Result<NliVerdict> {
        self.requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.pairs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        WordNli.judge(premise, hypothesis).await
    }
    async fn judge_all(&self, pairs: &[(String, String)]) -> Vec<hopwise_core::Result<NliVerdict>> {
        self.requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.pairs.fetch_add(pairs.len(), std::sync::atomic::Ordering::SeqCst);
        let mut verdicts = Vec::new();
        for (p, h) in pairs {
            verdicts.push(WordNli.judge(p, h).await);
        }
        verdicts
    }
}

#[tokio::test]
async fn batched_rounds_give_the_same_scores_in_two_requests() {
    use std::sync::atomic::Ordering::SeqCst;
    let passages = JAWS.map(passage);
    for uncited in [false, true] {
        let pairwise = Arc::new(BatchingNli::default());
        let judge = Judge::new(pairwise.clone(), Recorder::new("q", "hgot"), 300, false);
        let expected = score_all(&RATIONALES, &passages, &judge, uncited).await;
        let batching = Arc::new(BatchingNli::default());
        let rec = Recorder::new("q", "hgot");
        let judge = Judge::new(batching.clone(), rec.clone(), 300, true);
        assert_eq!(score_all(&RATIONALES, &passages, &judge, uncited).await, expected);
        assert_eq!(rec.snapshot().stats.nli_calls as usize, batching.pairs.load(SeqCst), "judgements are pairs");
        // Support with each multi-cited statement's citations alone; the others without one (only
        // the three-citation statement needs them).
        assert_eq!(batching.requests.load(SeqCst), 2);
        assert_eq!(pairwise.requests.load(SeqCst), pairwise.pairs.load(SeqCst));
        // Every multi-cited statement here is supported, so asking their citations early costs none.
        assert_eq!(batching.pairs.load(SeqCst), pairwise.pairs.load(SeqCst), "the same pairs");
    }
}

#[tokio::test]
async fn under_the_cap_support_is_judged_first_and_a_refused_judgement_makes_nothing_relevant() {
    let passages = [passage("Jaws was directed by Steven Spielberg"), passage("Spielberg was born in Cincinnati")];
    // Two judgements: both supports; the relevance of [1] and [2] is refused.
    let rationales = ["Jaws was directed by Spielberg [1][2].", "Spielberg was born in Cincinnati [2]."];
    for batch in [false, true] {
        let nli = Arc::new(BatchingNli::default());
        let rec = Recorder::new("q", "hgot");
        let judge = Judge::new(nli.clone(), rec.clone(), 2, batch);
        let scores = score_all(&rationales, &passages, &judge, false).await;
        assert_eq!(scores.iter().map(|s| s.recall).collect::<Vec<_>>(), [1.0, 1.0]);
        assert_eq!(scores[0].statements[0].relevant, [false, false], "refused, not evidence");
        assert_eq!(scores[1].precision, 1.0, "a lone citation carries the support");
        assert_eq!(nli.pairs.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert!(rec.snapshot().notes.iter().any(|n| n.contains("max_nli_calls")));
    }
}

#[tokio::test]
async fn batching_asks_an_unsupported_statements_citations_alone_too_and_scores_it_the_same() {
    use std::sync::atomic::Ordering::SeqCst;
    let passages = JAWS.map(passage);
    let rationale = ["Rome is in Italy [1][2]."];
    let mut scores = Vec::new();
    let mut pairs = Vec::new();
    for batch in [false, true] {
        let nli = Arc::new(BatchingNli::default());
        let judge = Judge::new(nli.clone(), Recorder::new("q", "hgot"), 300, batch);
        scores.push(score_all(&rationale, &passages, &judge, false).await);
        pairs.push((nli.pairs.load(SeqCst), nli.requests.load(SeqCst)));
    }
    assert_eq!(scores[0], scores[1]);
    assert_eq!(scores[1][0].statements[0].relevant, [false, false]);
    assert_eq!(pairs, [(1, 1), (3, 1)], "(judgements, requests) pairwise, then batched");
}
