//! The published trace schema (`docs/trace.schema.json`): hopwise-core's trace types with, for each
//! strategy in [`STRATEGIES`], the detail types it writes on its nodes and on the trace.

use hopwise_core::trace_schema::{self as core_schema, detail_rule};
use schemars::generate::SchemaGenerator;
use schemars::Schema;
use serde_json::{Map, Value};

use super::baseline::BaselineNode;
use super::hgot::{HgotNode, HgotTrace};
use super::sentence::{SentenceNode, SentenceTrace};
use super::toqd::ToqdNode;
use crate::strategy::STRATEGIES;

/// The detail types a strategy writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetailKind {
    Toqd,
    SentenceLoop,
    Hgot,
    /// Every other strategy: the baselines, which record only on `Q`.
    Baseline,
}

pub fn kind_of(strategy: &str) -> DetailKind {
    match strategy {
        "toqd" | "toqd-noir" | "toqd-paper" | "toqd-noir-paper" => DetailKind::Toqd,
        "uar" | "always-retrieve" | "always-retrieve-subquery" | "flare-instruct" | "flare-direct" => {
            DetailKind::SentenceLoop
        }
        "hgot" | "hgot-paper" => DetailKind::Hgot,
        _ => DetailKind::Baseline,
    }
}

/// One rule per detail kind, naming the strategies of that kind. A strategy without trace detail
/// writes no `extra` on the trace.
fn rules(generator: &mut SchemaGenerator) -> Vec<Value> {
    let kinds = [DetailKind::Toqd, DetailKind::SentenceLoop, DetailKind::Hgot, DetailKind::Baseline];
    kinds
        .into_iter()
        .map(|kind| {
            let names: Vec<&str> = STRATEGIES.iter().map(|s| s.name).filter(|n| kind_of(n) == kind).collect();
            let (node, trace) = match kind {
                DetailKind::Toqd => (generator.subschema_for::<ToqdNode>(), Schema::from(false)),
                DetailKind::SentenceLoop => {
                    (generator.subschema_for::<SentenceNode>(), generator.subschema_for::<SentenceTrace>())
                }
                DetailKind::Hgot => (generator.subschema_for::<HgotNode>(), generator.subschema_for::<HgotTrace>()),
                DetailKind::Baseline => (generator.subschema_for::<BaselineNode>(), Schema::from(false)),
            };
            detail_rule(&names, Some(node), Some(trace))
        })
        .collect()
}

/// The trace's JSON Schema with every strategy's details.
pub fn trace_schema() -> Value {
    core_schema::trace_schema(&rules)
}

/// [`trace_schema`] as the published file holds it.
pub fn trace_schema_text() -> String {
    core_schema::trace_schema_text(&rules)
}

/// [`trace_schema`] as OpenAPI 3.1 component schemas, for the server's API document.
pub fn trace_components() -> Map<String, Value> {
    core_schema::trace_components(&rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_has_a_rule() {
        let schema = trace_schema();
        let named: Vec<&str> = schema["allOf"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|rule| rule["if"]["properties"]["strategy"]["enum"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        for spec in STRATEGIES {
            assert_eq!(named.iter().filter(|n| **n == spec.name).count(), 1, "{}", spec.name);
        }
        assert_eq!(kind_of("toqd-noir"), DetailKind::Toqd);
        assert_eq!(kind_of("flare-instruct"), DetailKind::SentenceLoop);
    }
}
