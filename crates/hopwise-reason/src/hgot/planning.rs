//! PLAN, SELF-REFLECT and FORMALIZE (steps and their dependency DAG), and STOP's similarity test.

use hopwise_core::{Passage, Repair};

use super::demos::cosine;
use super::steps::{
    dependency_text, parse_dependency_sentences, parse_formal_edges, parse_steps, repair_dependencies, Dependencies,
    Steps,
};
use super::{update_detail, Run, ScoredPassage};

use crate::details::hgot::{EdgesFrom, PlanRecord};
use crate::error::Result;

/// A repaired plan.
pub(super) struct Plan {
    pub steps: Steps,
    pub deps: Dependencies,
}

/// Whether a dependency reply says something readable: at least one dependency, or an explicit
/// "none".
fn readable(text: &str) -> bool {
    let lower = text.to_lowercase();
    !parse_dependency_sentences(text).is_empty()
        || ["no dependenc", "none", "independent", "not depend", "no step depends"].iter().any(|p| lower.contains(p))
}

pub(super) use crate::details::hgot::SimilarityTest;

impl Run<'_> {
    fn record_repairs(&self, repairs: &[Repair]) {
        for r in repairs {
            self.ctx.rec().repair(r.clone());
        }
    }

    /// PLAN → SELF-REFLECT → FORMALIZE. None when the plan lists no step (`no_steps`, recorded).
    pub(super) async fn plan(&self, question: &str, id: &str, passages: &[ScoredPassage]) -> Result<Option<Plan>> {
        let opts = &self.hgot.opts;
        let shown: Vec<Passage> = passages.iter().map(|p| p.passage.clone()).collect();
        let demos = self.plan_demos(question).await?;
        let max_steps = opts.max_steps.to_string();
        let reply = self
            .ctx
            .complete(
                "plan",
                Some(id),
                "hgot_plan",
                &[
                    ("demonstrations", &demos),
                    ("passages", &self.ctx.format_passages(&shown)),
                    ("question", question),
                    ("max_steps", &max_steps),
                ],
            )
            .await?;
        let steps = parse_steps(&reply, opts.max_steps, &Self::stage("plan", id));
        self.record_repairs(&steps.repairs);
        let mut record = PlanRecord { reply: reply.clone(), steps: steps.texts.clone(), ..Default::default() };
        if steps.is_empty() {
            self.ctx.rec().repair(Repair {
                stage: Self::stage("plan", id),
                rule: "no_steps".into(),
                detail: "the plan listed no step; the probe's answer stands".into(),
            });
            self.ctx.rec().update_node(id, |n| update_detail(n, |d| d.plan = Some(record)));
            return Ok(None);
        }

        let mut deps = Dependencies { n: steps.len(), ..Default::default() };
        if steps.len() > 1 {
            let planned = dependency_text(&reply);
            // The plan's own sentences use the model's step labels; later prompts show positions.
            let (planned_edges, label_repairs) =
                steps.map_labels(&parse_dependency_sentences(&planned), &Self::stage("plan", id));
            let mut sentences = planned.clone();
            let mut source = EdgesFrom::Plan;
            if opts.self_reflect {
                let reflected = self
                    .ctx
                    .complete("self_reflect", Some(id), "hgot_reflect", &[("steps", &steps.numbered())])
                    .await?;
                record.reflect = Some(reflected.clone());
                if readable(&reflected) {
                    sentences = reflected;
                    source = EdgesFrom::SelfReflect;
                } else {
                    self.ctx.rec().repair(Repair {
                        stage: Self::stage("self_reflect", id),
                        rule: "unreadable_dependencies".into(),
                        detail: "the reflection named no dependency and no \"none\"; the plan's sentences are used"
                            .into(),
                    });
                }
            }
            // An explicit "no dependencies" needs no formalising; anything else (even prose our
            // parser cannot read) goes to Formalize when it is on.
            let explicit_none = parse_dependency_sentences(&sentences).is_empty() && readable(&sentences);
            let raw = if explicit_none {
                Vec::new()
            } else if opts.formalize {
                let formal = self
                    .ctx
                    .complete(
                        "formalize",
                        Some(id),
                        "hgot_formalize",
                        &[("steps", &steps.numbered()), ("dependencies", &sentences)],
                    )
                    .await?;
                record.formal = Some(formal.clone());
                let edges = parse_formal_edges(&formal);
                let from_sentences = parse_dependency_sentences(&sentences);
                if edges.is_empty() && !from_sentences.is_empty() {
                    self.ctx.rec().repair(Repair {
                        stage: Self::stage("formalize", id),
                        rule: "formalize_unreadable".into(),
                        detail: "no arrow could be read; the dependency sentences were parsed directly".into(),
                    });
                    source = EdgesFrom::Sentences;
                    from_sentences
                } else {
                    source = EdgesFrom::Formalize;
                    edges
                }
            } else if source == EdgesFrom::Plan {
                self.record_repairs(&label_repairs);
                planned_edges
            } else {
                parse_dependency_sentences(&sentences)
            };
            if raw.is_empty() && !explicit_none {
                self.ctx.rec().repair(Repair {
                    stage: Self::stage("plan", id),
                    rule: "no_dependencies_read".into(),
                    detail: "no dependency could be read; the steps are searched independently".into(),
                });
            }
            deps = repair_dependencies(steps.len(), &raw, &Self::stage("formalize", id));
            self.record_repairs(&deps.repairs);
            record.dependencies = Some(sentences);
            record.edges_from = Some(source);
        }
        record.edges = Some(deps.edges.clone());
        self.ctx.rec().update_node(id, |n| update_detail(n, |d| d.plan = Some(record)));
        Ok(Some(Plan { steps, deps }))
    }

    /// Similarity of a one-step plan's step to the question: cosine of sentence embeddings when the
    /// context has an embedder, else word-set Jaccard. The method is noted once per question.
    pub(super) async fn single_step_similarity(&self, question: &str, step: &str) -> SimilarityTest {
        let opts = &self.hgot.opts;
        let mut fallback_reason = "no embedder configured".to_string();
        if let Some(embedder) = self.ctx.embedder() {
            match embedder.embed(&[question.to_string(), step.to_string()]).await {
                Ok(v) if v.len() == 2 => {
                    let test = SimilarityTest {
                        similarity: cosine(&v[0], &v[1]),
                        threshold: opts.stop_cosine,
                        method: format!("embedding:{}", embedder.model_id()),
                    };
                    self.note_stop_method(&test.method, opts.stop_cosine, None);
                    return test;
                }
                Ok(v) => fallback_reason = format!("the embedder returned {} vectors for 2 texts", v.len()),
                Err(e) => fallback_reason = format!("the embedder failed ({e})"),
            }
        }
        let test = SimilarityTest {
            similarity: crate::uncertainty::jaccard(question, step),
            threshold: opts.stop_jaccard,
            method: "jaccard".into(),
        };
        self.note_stop_method("jaccard", opts.stop_jaccard, Some(&fallback_reason));
        test
    }

    fn note_stop_method(&self, method: &str, threshold: f64, fallback: Option<&str>) {
        let Ok(mut m) = self.stop_method.lock() else { return };
        if m.as_deref() == Some(method) {
            return;
        }
        *m = Some(method.to_string());
        drop(m);
        let why = fallback.map(|f| format!(" ({f})")).unwrap_or_default();
        self.ctx.rec().note(format!("STOP similarity: {method}, threshold {threshold}{why}"));
    }
}
