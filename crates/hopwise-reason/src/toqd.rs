//! ToQD (work in progress in this commit).
use async_trait::async_trait;
use serde::Deserialize;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::strategy::{Answer, Strategy};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToqdOptions {}

pub struct Toqd {
    _opts: ToqdOptions,
    with_retrieval: bool,
}

impl Toqd {
    pub fn new(opts: ToqdOptions, with_retrieval: bool) -> Self {
        Self {
            _opts: opts,
            with_retrieval,
        }
    }
}

#[async_trait]
impl Strategy for Toqd {
    fn name(&self) -> &str {
        if self.with_retrieval {
            "toqd"
        } else {
            "toqd-noir"
        }
    }
    fn needs_retriever(&self) -> bool {
        self.with_retrieval
    }
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let text = ctx
            .complete(
                "self_verify",
                None,
                "toqd_self_verify",
                &[("question", question)],
            )
            .await?;
        Ok(Answer {
            text,
            rationale: None,
        })
    }
}
