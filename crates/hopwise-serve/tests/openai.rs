//! The OpenAI-compatible endpoint, checked with a real OpenAI client library (async-openai).

mod common;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::{
    ChatCompletionRequestSystemMessageArgs, ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequest,
    CreateChatCompletionRequestArgs, FinishReason, Role,
};
use async_openai::Client;
use common::{builder, parse_sse, toqd_model, TestServer, QUESTION};
use futures::StreamExt;
use hopwise_core::Trace;

fn openai(server: &TestServer, key: &str) -> Client<OpenAIConfig> {
    Client::with_config(OpenAIConfig::new().with_api_base(server.url("/v1")).with_api_key(key))
}

fn request(model: &str) -> CreateChatCompletionRequest {
    CreateChatCompletionRequestArgs::default()
        .model(model)
        .temperature(0.2)
        .messages(vec![
            ChatCompletionRequestSystemMessageArgs::default()
                .content("Answer briefly.")
                .build()
                .expect("system")
                .into(),
            ChatCompletionRequestUserMessageArgs::default().content("Hello").build().expect("user").into(),
            ChatCompletionRequestUserMessageArgs::default().content(QUESTION).build().expect("user").into(),
        ])
        .build()
        .expect("request")
}

#[tokio::test]
async fn a_real_openai_client_gets_the_answer() {
    let server = TestServer::start(builder(toqd_model()).token(Some("tok-123".into())).build()).await;
    let client = openai(&server, "tok-123");

    let models = client.models().list().await.expect("models");
    assert!(models.data.iter().any(|m| m.id == "hopwise-toqd"));

    let resp = client.chat().create(request("hopwise-toqd")).await.expect("chat completion");
    assert_eq!(resp.object, "chat.completion");
    assert_eq!(resp.model, "hopwise-toqd");
    let choice = &resp.choices[0];
    assert_eq!(choice.message.role, Role::Assistant);
    assert_eq!(choice.message.content.as_deref(), Some("Rush"));
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    let usage = resp.usage.expect("usage");
    assert!(usage.prompt_tokens > 0 && usage.total_tokens == usage.prompt_tokens + usage.completion_tokens);

    // A bare strategy name works as a model too.
    let resp = client.chat().create(request("cot")).await.expect("chat completion");
    assert_eq!(resp.choices[0].message.content.as_deref(), Some("Rush"));
}

#[tokio::test]
async fn the_trace_rides_in_an_extension_field() {
    let server = TestServer::start(builder(toqd_model()).build()).await;
    let body: serde_json::Value = reqwest::Client::new()
        .post(server.url("/v1/chat/completions"))
        .json(&serde_json::json!({"model": "hopwise-toqd", "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]}))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let trace: Trace = serde_json::from_value(body["hopwise_trace"].clone()).expect("hopwise_trace is a trace");
    assert_eq!(trace.question, QUESTION);
    assert_eq!(trace.answer, "Rush");
    assert_eq!(body["choices"][0]["message"]["content"], "Rush");
}

#[tokio::test]
async fn streaming_sends_chunks_then_done() {
    let server = TestServer::start(builder(toqd_model()).build()).await;
    let client = openai(&server, "unused");
    let mut req = request("hopwise-toqd");
    req.stream = Some(true);
    let mut stream = client.chat().create_stream(req.clone()).await.expect("stream");
    let (mut text, mut chunks, mut finish, mut role) = (String::new(), 0, None, None);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("a valid chunk");
        assert_eq!(chunk.object, "chat.completion.chunk");
        chunks += 1;
        for c in chunk.choices {
            role = role.or(c.delta.role);
            text.push_str(c.delta.content.as_deref().unwrap_or_default());
            finish = finish.or(c.finish_reason);
        }
    }
    assert_eq!(text, "Rush");
    assert_eq!(role, Some(Role::Assistant));
    assert_eq!(finish, Some(FinishReason::Stop));
    assert!(chunks >= 3, "role, content, stop: {chunks}");

    // On the wire: the stream ends with [DONE] and the last chunk holds the trace.
    let body = streamed_chat_body(&server).await;
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    let events = parse_sse(&body);
    let last_chunk = &events[events.len() - 2].1;
    assert_eq!(last_chunk["choices"][0]["finish_reason"], "stop");
    assert_eq!(last_chunk["hopwise_trace"]["answer"], "Rush");
}

/// The raw body of a streamed chat completion of `QUESTION` by `hopwise-toqd`.
async fn streamed_chat_body(server: &TestServer) -> String {
    reqwest::Client::new()
        .post(server.url("/v1/chat/completions"))
        .json(&serde_json::json!({"model": "hopwise-toqd", "stream": true, "messages": [{"role": "user", "content": QUESTION}]}))
        .send()
        .await
        .expect("send")
        .text()
        .await
        .expect("body")
}

/// With `stream: true` the graph's progress comes first, as reasoning chunks (one line per planned
/// node, search and answered node, never in a chunk with content), then the answer as content.
#[tokio::test]
async fn streaming_shows_the_graph_as_reasoning_before_the_answer() {
    let server = TestServer::start(builder(toqd_model()).build()).await;
    let body = streamed_chat_body(&server).await;
    let events = parse_sse(&body);
    let deltas: Vec<&serde_json::Value> =
        events.iter().filter_map(|(_, v)| v.get("choices").and_then(|c| c.get(0)).map(|c| &c["delta"])).collect();
    let reasoning: Vec<usize> = (0..deltas.len()).filter(|&i| deltas[i].get("reasoning_content").is_some()).collect();
    let content: Vec<usize> =
        (0..deltas.len()).filter(|&i| deltas[i]["content"].as_str().is_some_and(|c| !c.is_empty())).collect();
    assert!(!reasoning.is_empty() && !content.is_empty(), "{body}");
    assert!(reasoning.iter().max() < content.iter().min(), "reasoning first: {body}");
    for &i in &reasoning {
        assert!(deltas[i].get("content").is_none(), "never in the same chunk as content");
        assert_eq!(deltas[i]["reasoning"], deltas[i]["reasoning_content"], "both names carry the line");
    }
    let lines: String = reasoning.iter().filter_map(|&i| deltas[i]["reasoning_content"].as_str()).collect();
    let trace: Trace = serde_json::from_value(events[events.len() - 2].1["hopwise_trace"].clone()).expect("trace");
    for node in trace.nodes.iter().filter(|n| n.id != "Q") {
        assert!(lines.contains(&format!("{}. ", node.id)), "node {} is shown: {lines}", node.id);
    }
    // The typed client still reads the stream.
    let mut req = request("hopwise-toqd");
    req.stream = Some(true);
    let mut stream = openai(&server, "unused").chat().create_stream(req).await.expect("stream");
    let mut text = String::new();
    while let Some(chunk) = stream.next().await {
        for c in chunk.expect("a valid chunk").choices {
            text.push_str(c.delta.content.as_deref().unwrap_or_default());
        }
    }
    assert_eq!(text, "Rush");
}

#[tokio::test]
async fn errors_reach_the_client_as_api_errors() {
    let server = TestServer::start(builder(toqd_model()).token(Some("tok-123".into())).build()).await;
    let err = openai(&server, "tok-123").chat().create(request("gpt-4o")).await.expect_err("unknown model");
    match err {
        OpenAIError::ApiError(e) => {
            assert!(e.message.contains("gpt-4o") && e.message.contains("/v1/models"), "{}", e.message);
            assert_eq!(e.r#type.as_deref(), Some("model_not_found"));
        }
        other => panic!("expected an API error, got {other:?}"),
    }
    let err = openai(&server, "wrong").chat().create(request("hopwise-toqd")).await.expect_err("bad key");
    assert!(
        matches!(err, OpenAIError::ApiError(ref e) if e.r#type.as_deref() == Some("authentication_error")),
        "{err:?}"
    );
    // No user message.
    let resp = reqwest::Client::new()
        .post(server.url("/v1/chat/completions"))
        .bearer_auth("tok-123")
        .json(&serde_json::json!({"model": "hopwise-toqd", "messages": [{"role": "system", "content": "x"}]}))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), reqwest::StatusCode::BAD_REQUEST);
}
