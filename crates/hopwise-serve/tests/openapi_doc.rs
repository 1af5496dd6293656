//! The API document (`GET /openapi.json`) against the real server: every route the router serves is
//! documented and every documented operation is served; and real requests and the handlers' real
//! responses (JSON bodies, each server-sent event's data, error bodies) validate against the schemas
//! the document gives for that path, method, status and media type.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{builder, parse_sse, toqd_model, TestServer, QUESTION};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client")
}

/// A JSON pointer token (`/` and `~` escaped).
fn token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

struct Doc(Value);

impl Doc {
    async fn fetch(server: &TestServer) -> Self {
        let resp = client().get(server.url("/openapi.json")).send().await.expect("openapi");
        assert_eq!(resp.status(), StatusCode::OK);
        Doc(resp.json().await.expect("the document is JSON"))
    }

    /// Every `(METHOD, path)` the document describes.
    fn operations(&self) -> BTreeSet<(String, String)> {
        let paths = self.0["paths"].as_object().expect("paths");
        paths
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .into_iter()
                    .flat_map(|ops| ops.keys())
                    .filter(|m| ["get", "post", "put", "patch", "delete"].contains(&m.as_str()))
                    .map(move |m| (m.to_uppercase(), path.clone()))
            })
            .collect()
    }

    /// Follows a `$ref` inside the document (`#/components/...`).
    fn deref<'a>(&'a self, mut node: &'a Value) -> &'a Value {
        while let Some(target) = node.get("$ref").and_then(Value::as_str) {
            node = self.0.pointer(target.trim_start_matches('#')).unwrap_or_else(|| panic!("dangling {target}"));
        }
        node
    }

    /// The JSON pointer of the schema of `status`/`media` in the response of `method path`.
    fn response_schema(&self, method: &Method, path: &str, status: StatusCode, media: &str) -> String {
        let op = format!("/paths/{}/{}", token(path), method.as_str().to_lowercase());
        let responses = &self.0.pointer(&format!("{op}/responses")).unwrap_or_else(|| panic!("{op} has responses"));
        let response = responses
            .get(status.as_str())
            .unwrap_or_else(|| panic!("{method} {path}: status {status} is not documented"));
        let response = self.deref(response);
        assert!(
            response["content"].get(media).is_some(),
            "{method} {path} {status}: media type {media} is not documented"
        );
        // Name the schema through the component when the response is a reference to one.
        match response_ref(responses, status) {
            Some(component) => format!("{component}/content/{}/schema", token(media)),
            None => format!("{op}/responses/{}/content/{}/schema", status.as_str(), token(media)),
        }
    }

    /// Every way `value` fails the schema at `pointer` (the whole document is the schema's root, so
    /// its `#/components/...` references resolve).
    fn check(&self, pointer: &str, value: &Value, what: &str) {
        let mut schema = self.0.clone();
        schema["$ref"] = Value::from(format!("#{pointer}"));
        let validator = jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{pointer}: {e}"));
        let errors: Vec<String> =
            validator.iter_errors(value).map(|e| format!("at `{}`: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{what} does not match {pointer}:\n{}\n{value:#}", errors.join("\n"));
    }

    fn component(name: &str) -> String {
        format!("/components/schemas/{name}")
    }
}

/// The component a response object refers to, as a pointer.
fn response_ref(responses: &Value, status: StatusCode) -> Option<String> {
    responses[status.as_str()]["$ref"].as_str().map(|r| r.trim_start_matches('#').to_string())
}

/// `(METHOD, path)` of every `.route(...)` in the router's source.
fn routes_in_the_router() -> BTreeSet<(String, String)> {
    include_str!("../src/lib.rs")
        .split(".route(\"")
        .skip(1)
        .map(|rest| {
            let path = rest.split('"').next().unwrap_or_default().to_string();
            let after = rest.split_once("\", ").map(|(_, a)| a).unwrap_or_default();
            let method = after.split('(').next().unwrap_or_default().to_uppercase();
            (method, path)
        })
        .collect()
}

#[tokio::test]
async fn the_document_and_the_router_name_the_same_operations() {
    let server = TestServer::start(builder(toqd_model()).build()).await;
    let doc = Doc::fetch(&server).await;
    assert!(doc.0["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")), "JSON Schema 2020-12 dialect");
    let routes = routes_in_the_router();
    assert!(routes.len() >= 10, "the router's routes were found: {routes:?}");
    assert_eq!(doc.operations(), routes, "documented operations vs the router's routes");
    // And each documented operation is really served (the fallback answers 404 "no such endpoint").
    for (method, path) in doc.operations() {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let resp = client().request(method.clone(), server.url(&path)).send().await.expect("request");
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        assert!(
            status != StatusCode::METHOD_NOT_ALLOWED && !body.contains("no such endpoint"),
            "{method} {path} is documented but not served ({status})"
        );
    }
}

/// Sends `body` (checked against the documented request body first) and checks the response.
async fn exchange(
    doc: &Doc,
    server: &TestServer,
    method: Method,
    path_and_query: &str,
    body: Option<Value>,
    accept: &str,
) -> (StatusCode, String) {
    let path = path_and_query.split('?').next().unwrap_or_default();
    let mut req = client().request(method.clone(), server.url(path_and_query)).header("accept", accept);
    if let Some(body) = body {
        let pointer = format!(
            "/paths/{}/{}/requestBody/content/application~1json/schema",
            token(path),
            method.as_str().to_lowercase()
        );
        doc.check(&pointer, &body, &format!("the request body of {method} {path}"));
        req = req.json(&body);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status();
    let media = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .to_string();
    let text = resp.text().await.expect("body");
    let pointer = doc.response_schema(&method, path, status, &media);
    match media.as_str() {
        "application/json" => {
            let value: Value = serde_json::from_str(&text).expect("a JSON body");
            doc.check(&pointer, &value, &format!("{method} {path} {status}"));
        }
        "text/event-stream" => check_events(doc, path, &text),
        _ => doc.check(&pointer, &Value::String(text.clone()), &format!("{method} {path} {status}")),
    }
    (status, text)
}

/// Each event's data against the component the document names for it.
fn check_events(doc: &Doc, path: &str, text: &str) {
    let events = parse_sse(text);
    assert!(!events.is_empty(), "{path}: no events");
    for (name, data) in events {
        let component = match (path, name.as_str()) {
            ("/v1/chat/completions", _) if data == "[DONE]" => continue,
            ("/v1/chat/completions", _) if data.get("error").is_some() => "Error",
            ("/v1/chat/completions", _) => "ChatCompletionChunk",
            (_, "final") => "AskFinalEvent",
            (_, "error") => "Error",
            _ => "Event",
        };
        doc.check(&Doc::component(component), &data, &format!("{path}: event `{name}`"));
    }
}

#[tokio::test]
async fn real_requests_and_responses_match_the_document() {
    let server = TestServer::start(builder(toqd_model()).build()).await;
    let doc = Doc::fetch(&server).await;
    let ask = json!({"question": QUESTION, "strategy": "toqd-paper", "options": {"critique": false}, "k": 3});
    let (status, _) = exchange(&doc, &server, Method::POST, "/v1/ask", Some(ask.clone()), "application/json").await;
    assert_eq!(status, StatusCode::OK);
    let (status, events) = exchange(&doc, &server, Method::POST, "/v1/ask", Some(ask), "text/event-stream").await;
    assert_eq!(status, StatusCode::OK);
    assert!(events.contains("event: final"), "{events}");
    let stream = "/v1/ask/stream?question=Which%20band%20released%20Counterparts%3F&strategy=cot";
    let (status, _) = exchange(&doc, &server, Method::GET, stream, None, "text/event-stream").await;
    assert_eq!(status, StatusCode::OK);

    let chat = json!({"model": "hopwise-cot", "messages": [{"role": "user", "content": QUESTION}]});
    let (status, _) =
        exchange(&doc, &server, Method::POST, "/v1/chat/completions", Some(chat.clone()), "application/json").await;
    assert_eq!(status, StatusCode::OK);
    let mut streamed = chat.clone();
    streamed["stream"] = json!(true);
    let (status, _) = exchange(&doc, &server, Method::POST, "/v1/chat/completions", Some(streamed), "*/*").await;
    assert_eq!(status, StatusCode::OK);

    for path in ["/v1/strategies", "/v1/models", "/healthz", "/metrics", "/openapi.json", "/", "/app.js", "/style.css"]
    {
        let (status, _) = exchange(&doc, &server, Method::GET, path, None, "*/*").await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }

    // Errors have the documented status and shape.
    let cases = [
        (Method::POST, "/v1/ask", json!({"question": "  "}), StatusCode::BAD_REQUEST),
        (Method::POST, "/v1/ask", json!({"question": QUESTION, "strategy": "nope"}), StatusCode::BAD_REQUEST),
        (Method::POST, "/v1/ask", json!({"question": QUESTION, "k": 0}), StatusCode::UNPROCESSABLE_ENTITY),
        (
            Method::POST,
            "/v1/chat/completions",
            json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "q"}]}),
            StatusCode::NOT_FOUND,
        ),
    ];
    for (method, path, body, expected) in cases {
        // These bodies are valid JSON for the schema only where the schema cannot tell (a blank question,
        // an unknown strategy); `k: 0` is outside the documented range, so it is sent unchecked.
        let (status, text) = if body["k"] == 0 {
            let resp = client().request(method.clone(), server.url(path)).json(&body).send().await.expect("request");
            let status = resp.status();
            let value: Value = resp.json().await.expect("JSON error");
            doc.check(&doc.response_schema(&method, path, status, "application/json"), &value, "k = 0");
            (status, value.to_string())
        } else {
            exchange(&doc, &server, method.clone(), path, Some(body), "application/json").await
        };
        assert_eq!(status, expected, "{method} {path}: {text}");
    }
}

#[tokio::test]
async fn a_refused_token_matches_the_document() {
    let server = TestServer::start(builder(toqd_model()).token(Some("s3cret-token".into())).build()).await;
    let resp = client().get(server.url("/openapi.json")).bearer_auth("s3cret-token").send().await.expect("openapi");
    let doc = Doc(resp.json().await.expect("JSON"));
    for path in ["/v1/strategies", "/v1/models", "/metrics", "/openapi.json"] {
        let (status, _) = exchange(&doc, &server, Method::GET, path, None, "application/json").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
}
