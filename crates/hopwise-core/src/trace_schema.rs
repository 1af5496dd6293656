//! The trace's JSON Schema. It is generated from the trace types ([`trace_schema`], with the details
//! of hopwise-reason's strategies) and published as `docs/trace.schema.json`; a test in hopwise-reason
//! keeps the two equal. With the `trace-check` feature (tests only)
//! every trace closed by [`Recorder::finish`](crate::Recorder::finish) is checked against the
//! published file, so the test suite proves the schema describes what the code writes.

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{json, Map, Value};

use crate::Trace;

/// Where the published schema lives, relative to the workspace root.
pub const PUBLISHED_PATH: &str = "docs/trace.schema.json";

/// Adds the schemas of the strategies' node and trace details to a generator and returns the rules
/// that tie them to the traces of those strategies (see [`detail_rule`]).
pub type DetailRules<'a> = &'a dyn Fn(&mut SchemaGenerator) -> Vec<Value>;

/// The JSON Schema (draft 2020-12) of a serialised [`Trace`], generated from the types. `NodeTrace`'s
/// and `Trace`'s `extra` are strategy-specific; `rules` says what they hold for which strategies
/// (hopwise-reason has the rules for every strategy it implements).
pub fn trace_schema(rules: DetailRules) -> Value {
    let (mut schema, defs) = generate::<Trace>("/$defs", rules);
    if let Some(root) = schema.as_object_mut() {
        root.insert("title".into(), Value::from("hopwise trace"));
        root.insert(
            "$comment".into(),
            Value::from(format!(
                "Generated from the Rust types of hopwise (trace schema_version {}); do not edit by hand.",
                crate::trace::TRACE_SCHEMA_VERSION
            )),
        );
        root.insert("$defs".into(), Value::Object(defs));
    }
    schema
}

/// [`trace_schema`] as OpenAPI 3.1 component schemas keyed by type name (`Trace` among them;
/// references point at `#/components/schemas/...`).
pub fn trace_components(rules: DetailRules) -> Map<String, Value> {
    components::<Trace>(rules)
}

/// `T`'s schema and those of the types it contains, as OpenAPI 3.1 component schemas keyed by type
/// name. For the server's API document.
pub fn openapi_components<T: JsonSchema>() -> Map<String, Value> {
    components::<T>(&|_| Vec::new())
}

fn components<T: JsonSchema>(rules: DetailRules) -> Map<String, Value> {
    let (mut root, mut components) = generate::<T>("/components/schemas", rules);
    if let Some(object) = root.as_object_mut() {
        object.remove("$schema");
    }
    components.insert(T::schema_name().into_owned(), root);
    components
}

/// A rule of a trace schema: in the traces of `strategies`, every node's `extra` matches `node`
/// and the trace's `extra` matches `trace` (each a schema from the generator, usually a reference).
/// Absent details stay allowed: a node that recorded nothing has no `extra`.
pub fn detail_rule(strategies: &[&str], node: Option<Schema>, trace: Option<Schema>) -> Value {
    let mut then = Map::new();
    if let Some(node) = node {
        then.insert("nodes".into(), json!({ "items": { "properties": { "extra": node } } }));
    }
    if let Some(trace) = trace {
        then.insert("extra".into(), trace.to_value());
    }
    json!({
        "if": { "properties": { "strategy": { "enum": strategies } }, "required": ["strategy"] },
        "then": { "properties": then },
    })
}

/// `T`'s root schema without its definitions, and the definitions (found at `definitions_path`),
/// every named object type closed (see [`close_objects`]); the rules go in the root's `allOf`.
fn generate<T: JsonSchema>(definitions_path: &str, rules: DetailRules) -> (Value, Map<String, Value>) {
    let settings = SchemaSettings::draft2020_12().with(|s| s.definitions_path = definitions_path.to_string().into());
    let mut generator = settings.into_generator();
    let rules = rules(&mut generator);
    let mut root = generator.into_root_schema_for::<T>().to_value();
    let mut defs =
        root.pointer_mut(definitions_path).and_then(Value::as_object_mut).map(std::mem::take).unwrap_or_default();
    // Drop the now empty container the definitions were generated into (`$defs` or `components`).
    if let (Some(object), Some(top)) = (root.as_object_mut(), definitions_path.split('/').nth(1)) {
        object.remove(top);
    }
    close_objects(&mut root);
    defs.values_mut().for_each(close_objects);
    if let (Some(object), false) = (root.as_object_mut(), rules.is_empty()) {
        object.insert("allOf".into(), Value::Array(rules));
    }
    (root, defs)
}

/// The schema describes exactly what is written: a named object type admits no other fields.
/// `unevaluatedProperties` (not `additionalProperties`) so that an event's fields, split between the
/// event and its flattened kind, count wherever they are declared.
fn close_objects(schema: &mut Value) {
    if let Some(object) = schema.as_object_mut() {
        if object.contains_key("properties") {
            object.insert("unevaluatedProperties".into(), Value::Bool(false));
        }
    }
}

/// [`trace_schema`] as the published file holds it: pretty JSON and a final newline.
pub fn trace_schema_text(rules: DetailRules) -> String {
    // Serialising a `Value` cannot fail.
    serde_json::to_string_pretty(&trace_schema(rules)).unwrap_or_default() + "\n"
}

#[cfg(feature = "trace-check")]
pub use check::{check_trace, check_trace_json, enforce};

#[cfg(feature = "trace-check")]
mod check {
    use std::sync::OnceLock;

    use serde_json::Value;

    use crate::Trace;

    /// The published schema, as committed (not as the types would generate it now).
    const PUBLISHED: &str = include_str!("../../../docs/trace.schema.json");

    fn validator() -> Result<&'static jsonschema::Validator, String> {
        static VALIDATOR: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
        VALIDATOR
            .get_or_init(|| {
                let schema: Value = serde_json::from_str(PUBLISHED)
                    .map_err(|e| format!("{} is not JSON: {e}", super::PUBLISHED_PATH))?;
                jsonschema::validator_for(&schema)
                    .map_err(|e| format!("{} is not a valid schema: {e}", super::PUBLISHED_PATH))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Every way `value` fails the published trace schema (empty: it validates).
    pub fn check_trace_json(value: &Value) -> Result<(), Vec<String>> {
        let validator = validator().map_err(|e| vec![e])?;
        let errors: Vec<String> =
            validator.iter_errors(value).map(|e| format!("at `{}`: {e}", e.instance_path())).collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// [`check_trace_json`] on the trace's serde form.
    pub fn check_trace(trace: &Trace) -> Result<(), Vec<String>> {
        let value = serde_json::to_value(trace).map_err(|e| vec![format!("the trace does not serialise: {e}")])?;
        check_trace_json(&value)
    }

    /// Panics when `trace` does not validate. Called by `Recorder::finish` in test builds only (this
    /// feature), where a panic is how a test fails.
    pub fn enforce(trace: &Trace) {
        if let Err(errors) = check_trace(trace) {
            panic!("the `{}` trace does not match {}:\n{}", trace.strategy, super::PUBLISHED_PATH, errors.join("\n"));
        }
    }
}
