//! What every strategy implements and receives: the `Strategy` trait, its `Answer`, and the
//! options it parses. The bottom of the crate's strategy layer: strategies import it, and the table
//! of strategies (`strategy.rs`) sits above them all.

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use crate::ctx::Ctx;
use crate::error::{ReasonError, Result};

/// What a strategy returns; the rest of the record is in the trace.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub text: String,
    pub rationale: Option<String>,
}

#[async_trait]
pub trait Strategy: Send + Sync {
    /// The name it is registered under in [`STRATEGIES`].
    fn name(&self) -> &str;
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer>;

    /// The prompt templates the strategy may render with the options it was built with, when they
    /// are fewer than its table row lists (`None`: the row's list, which covers every option). A
    /// row's prompts fingerprint hashes these, so a changed template marks only the rows that could
    /// have rendered it.
    fn templates(&self) -> Option<Vec<&'static str>> {
        None
    }
}

/// Strategy options as given in config (`[strategies.NAME]`) or flags. Each strategy deserialises its
/// own typed options from them and rejects keys it does not know.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StrategyOptions(pub serde_json::Map<String, serde_json::Value>);

impl StrategyOptions {
    pub fn parse<T: DeserializeOwned>(&self, strategy: &str) -> Result<T> {
        serde_json::from_value(serde_json::Value::Object(self.0.clone()))
            .map_err(|e| ReasonError::InvalidOption(format!("strategy `{strategy}`: {e}")))
    }

    pub fn set(&mut self, key: &str, value: serde_json::Value) {
        self.0.insert(key.to_string(), value);
    }

    /// These options with `overlay`'s keys laid over them.
    pub fn overlaid(mut self, overlay: &serde_json::Map<String, serde_json::Value>) -> Self {
        for (k, v) in overlay {
            self.set(k, v.clone());
        }
        self
    }
}
