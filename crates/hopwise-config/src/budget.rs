//! The `[budget]` section: what one question may spend. Each setting is declared once below; the
//! defaults are the reasoning crate's [`Budget`], which the section turns into.

use hopwise_reason::Budget;

use crate::settings::section;

section! {
    /// The `[budget]` section. `hopwise ask` and `hopwise serve` flags override it.
    #[serde(default, deny_unknown_fields)]
    pub struct BudgetConfig / BudgetOverrides {
        /// Graph expansions (node decompositions) allowed per question (ToQD's `r_max`).
        #[arg(long, value_name = "N")]
        r_max: u32 => u32 = Budget::default().r_max,
        /// Deepest nesting of child graphs and HGOT layers.
        #[arg(skip)]
        max_depth: u32 => u32 = Budget::default().max_depth,
        /// Model calls allowed per question.
        #[arg(skip)]
        max_llm_calls: u64 => u64 = Budget::default().max_llm_calls,
        /// Seconds a question may take; after that no model call starts and the best answer so far
        /// is given, marked best-effort.
        #[arg(long, value_name = "SECONDS")]
        max_seconds: Option<f64> => f64 = Budget::default().max_seconds,
        /// Prompt plus completion tokens a question may use; no model call starts once they are spent.
        #[arg(long, value_name = "TOKENS")]
        max_tokens: Option<u64> => u64 = Budget::default().max_tokens,
    }
}

impl BudgetConfig {
    /// The budget the strategies run under.
    pub fn budget(&self) -> Budget {
        Budget {
            r_max: self.r_max,
            max_depth: self.max_depth,
            max_llm_calls: self.max_llm_calls,
            max_seconds: self.max_seconds,
            max_tokens: self.max_tokens,
        }
    }
}
