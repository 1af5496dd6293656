//! The trace's JSON Schema. It is generated from the trace types ([`trace_schema`]) and published as
//! `docs/trace.schema.json`; a test keeps the two equal. With the `trace-check` feature (tests only)
//! every trace closed by [`Recorder::finish`](crate::Recorder::finish) is checked against the
//! published file, so the test suite proves the schema describes what the code writes.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};

use crate::Trace;

/// Where the published schema lives, relative to the workspace root.
pub const PUBLISHED_PATH: &str = "docs/trace.schema.json";

/// The JSON Schema (draft 2020-12) of a serialised [`Trace`], generated from the types.
pub fn trace_schema() -> Value {
    let (mut schema, defs) = generate::<Trace>("/$defs");
    if let Some(root) = schema.as_object_mut() {
        root.insert("title".into(), Value::from("hopwise trace"));
        root.insert(
            "$comment".into(),
            Value::from(format!(
                "Generated from the Rust types of hopwise-core (schema_version {}); do not edit by hand.",
                crate::trace::TRACE_SCHEMA_VERSION
            )),
        );
        root.insert("$defs".into(), Value::Object(defs));
    }
    schema
}

/// `T`'s schema and those of the types it contains, as OpenAPI 3.1 component schemas keyed by type
/// name (references point at `#/components/schemas/...`). For the server's API document.
pub fn openapi_components<T: JsonSchema>() -> Map<String, Value> {
    let (mut root, mut components) = generate::<T>("/components/schemas");
    if let Some(object) = root.as_object_mut() {
        object.remove("$schema");
    }
    components.insert(T::schema_name().into_owned(), root);
    components
}

/// `T`'s root schema without its definitions, and the definitions (found at `definitions_path`),
/// every named object type closed (see [`close_objects`]).
fn generate<T: JsonSchema>(definitions_path: &str) -> (Value, Map<String, Value>) {
    let settings = SchemaSettings::draft2020_12().with(|s| s.definitions_path = definitions_path.to_string().into());
    let mut root = settings.into_generator().into_root_schema_for::<T>().to_value();
    let mut defs = root.pointer_mut(definitions_path).and_then(Value::as_object_mut).map(std::mem::take).unwrap_or_default();
    // Drop the now empty container the definitions were generated into (`$defs` or `components`).
    if let (Some(object), Some(top)) = (root.as_object_mut(), definitions_path.split('/').nth(1)) {
        object.remove(top);
    }
    close_objects(&mut root);
    defs.values_mut().for_each(close_objects);
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
pub fn trace_schema_text() -> String {
    // Serialising a `Value` cannot fail.
    serde_json::to_string_pretty(&trace_schema()).unwrap_or_default() + "\n"
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
            panic!(
                "the `{}` trace does not match {}:\n{}",
                trace.strategy,
                super::PUBLISHED_PATH,
                errors.join("\n")
            );
        }
    }
}
