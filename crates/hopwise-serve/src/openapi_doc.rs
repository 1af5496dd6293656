//! The document served at `GET /openapi.json`: the hand-written paths, parameters and errors of
//! `assets/openapi.json`, with the error kinds and the schemas of the trace (and everything in it, each strategy's details included) and of the ask request
//! generated from the Rust types the handlers use, so those parts cannot drift from the code. The
//! hand-written rest is checked against the router and the handlers' real responses by
//! `tests/openapi_doc.rs`.

use std::sync::OnceLock;

use hopwise_core::trace_schema::openapi_components;
use hopwise_reason::details::schema::trace_components;
use serde_json::Value;

use crate::error::{Result, ServeError, ERROR_KINDS};
use crate::run::AskRequest;

const HAND_WRITTEN: &str = include_str!("../assets/openapi.json");

/// The assembled document, built on first use.
pub fn document() -> Result<&'static str> {
    static DOCUMENT: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    DOCUMENT
        .get_or_init(assemble)
        .as_deref()
        .map_err(|e| ServeError::Internal(format!("the API document cannot be assembled: {e}")))
}

fn assemble() -> std::result::Result<String, String> {
    let mut doc: Value = serde_json::from_str(HAND_WRITTEN).map_err(|e| format!("assets/openapi.json: {e}"))?;
    let schemas = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
        .ok_or("assets/openapi.json has no components.schemas")?;
    for (name, schema) in trace_components().into_iter().chain(openapi_components::<AskRequest>()) {
        if schemas.insert(name.clone(), schema).is_some() {
            return Err(format!("`{name}` is generated from the types; remove it from assets/openapi.json"));
        }
    }
    let kind = doc
        .pointer_mut("/components/schemas/Error/properties/error/properties/type")
        .and_then(Value::as_object_mut)
        .ok_or("assets/openapi.json has no Error.error.type")?;
    kind.insert("enum".into(), Value::from(ERROR_KINDS.to_vec()));
    serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_assembles_with_the_generated_schemas() {
        let doc: Value = serde_json::from_str(document().expect("assembles")).expect("JSON");
        for name in ["Trace", "NodeTrace", "Event", "Passage", "AskRequest"] {
            assert!(doc["components"]["schemas"][name].is_object(), "{name}");
        }
    }

    #[test]
    fn the_document_lists_every_error_kind() {
        use axum::http::StatusCode;
        let doc: Value = serde_json::from_str(document().expect("assembles")).expect("JSON");
        let listed = &doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["type"]["enum"];
        let bad = |status| ServeError::BadRequest { status, message: String::new() };
        let every = [
            bad(StatusCode::BAD_REQUEST),
            bad(StatusCode::PAYLOAD_TOO_LARGE),
            bad(StatusCode::NOT_FOUND),
            bad(StatusCode::METHOD_NOT_ALLOWED),
            ServeError::UnknownStrategy(String::new()),
            ServeError::ModelNotFound(String::new()),
            ServeError::Unauthorized,
            ServeError::Busy { limit: 1, retry_after_secs: 1 },
            ServeError::Timeout(1),
            ServeError::Upstream(String::new()),
            ServeError::Internal(String::new()),
        ];
        for e in every {
            assert!(
                listed.as_array().is_some_and(|l| l.iter().any(|k| k == e.kind())),
                "{} missing: {listed}",
                e.kind()
            );
        }
    }
}
