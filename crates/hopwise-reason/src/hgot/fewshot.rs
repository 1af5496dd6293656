//! Picking demonstrations for a prompt: kNN over sentence embeddings when the context has an
//! embedder (pool vectors computed once per embedder model), word overlap otherwise, or balanced
//! sampling. Zero-shot (an empty block) without a pool.

use std::sync::Arc;

use super::demos::{knn_embedded, render_plans, render_thoughts, select_lexical};
use super::options::DemoSelection;
use super::Run;
use crate::error::Result;

impl Run<'_> {
    async fn pick_demos(&self, question: &str) -> Vec<usize> {
        let Some(pool) = &self.hgot.pool else { return Vec::new() };
        let opts = &self.hgot.opts;
        let k = opts.demo_count;
        if opts.demo_selection == DemoSelection::Knn {
            match self.ctx.embedder() {
                Some(embedder) => match self.embedded_knn(embedder.as_ref(), question, k).await {
                    Ok(picked) => return picked,
                    Err(e) => self.note_demo_fallback(&format!("the embedder failed ({e})")),
                },
                None => self.note_demo_fallback("no embedder configured"),
            }
        }
        select_lexical(pool, opts.demo_selection, question, k)
    }

    async fn embedded_knn(
        &self,
        embedder: &dyn hopwise_core::Embedder,
        question: &str,
        k: usize,
    ) -> hopwise_core::Result<Vec<usize>> {
        let Some(pool) = &self.hgot.pool else { return Ok(Vec::new()) };
        let vectors = {
            let mut cached = self.hgot.pool_vectors.lock().await;
            match cached.as_ref() {
                Some((model, v)) if model == embedder.model_id() => v.clone(),
                _ => {
                    let v = Arc::new(embedder.embed(&pool.questions()).await?);
                    *cached = Some((embedder.model_id().to_string(), v.clone()));
                    v
                }
            }
        };
        let query = embedder.embed(&[question.to_string()]).await?;
        let query = query.first().map(Vec::as_slice).unwrap_or(&[]);
        Ok(knn_embedded(&vectors, query, k))
    }

    /// The Probe/Infer demonstrations block ("" when zero-shot).
    pub(super) async fn thought_demos(&self, question: &str) -> Result<String> {
        let Some(pool) = &self.hgot.pool else { return Ok(String::new()) };
        let picked = self.pick_demos(question).await;
        render_thoughts(pool, &picked, &|name: &str, vars: &[(&str, &str)]| self.ctx.render(name, vars))
    }

    /// The Plan demonstrations block, from the picked examples that carry steps.
    pub(super) async fn plan_demos(&self, question: &str) -> Result<String> {
        let Some(pool) = &self.hgot.pool else { return Ok(String::new()) };
        let picked = self.pick_demos(question).await;
        render_plans(pool, &picked, &|name: &str, vars: &[(&str, &str)]| self.ctx.render(name, vars))
    }
}
