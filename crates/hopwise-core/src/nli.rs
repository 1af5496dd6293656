//! Natural-language inference, used by the uncertainty estimators and HGOT's citation scoring.
//! The trait is open so a real cross-encoder can replace the LLM judge later.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NliLabel {
    Entailment,
    Neutral,
    Contradiction,
}

/// Label probabilities; they sum to 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NliVerdict {
    pub entailment: f32,
    pub neutral: f32,
    pub contradiction: f32,
}

impl NliVerdict {
    pub fn certain(label: NliLabel) -> Self {
        let mut v = Self { entailment: 0.0, neutral: 0.0, contradiction: 0.0 };
        match label {
            NliLabel::Entailment => v.entailment = 1.0,
            NliLabel::Neutral => v.neutral = 1.0,
            NliLabel::Contradiction => v.contradiction = 1.0,
        }
        v
    }

    pub fn label(&self) -> NliLabel {
        if self.entailment >= self.neutral && self.entailment >= self.contradiction {
            NliLabel::Entailment
        } else if self.contradiction >= self.neutral {
            NliLabel::Contradiction
        } else {
            NliLabel::Neutral
        }
    }
}

#[async_trait]
pub trait Nli: Send + Sync {
    fn name(&self) -> &str;
    /// Does `premise` entail `hypothesis`?
    async fn judge(&self, premise: &str, hypothesis: &str) -> Result<NliVerdict>;

    /// Judges several (premise, hypothesis) pairs, one verdict or error per pair in order. A
    /// backend that can judge them in one request overrides this; by default each pair is asked
    /// on its own.
    async fn judge_all(&self, pairs: &[(String, String)]) -> Vec<Result<NliVerdict>> {
        let mut verdicts = Vec::with_capacity(pairs.len());
        for (premise, hypothesis) in pairs {
            verdicts.push(self.judge(premise, hypothesis).await);
        }
        verdicts
    }
}
