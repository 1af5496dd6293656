//! The OpenAI chat-completions wire format: what we send, and a lenient reading of what comes back
//! (servers differ in which optional fields they fill).

use hopwise_core::{ChatMessage, ChatResponse, Completion, Usage};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize)]
pub(crate) struct WireRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [ChatMessage],
    pub temperature: f32,
    pub top_p: f32,
    pub max_tokens: u32,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub logprobs: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    /// llama.cpp's server extension: a GBNF grammar constraining the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grammar: Option<&'a str>,
    /// OpenAI's structured output: `{"type": "json_schema", "json_schema": {…}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct WireResponse {
    choices: Option<Vec<WireChoice>>,
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    index: Option<u32>,
    message: Option<WireMessage>,
    /// Legacy completions shape, which some servers still use inside chat responses.
    text: Option<String>,
    finish_reason: Option<String>,
    /// Read separately and leniently: a server's odd logprobs must not make the answer unusable.
    logprobs: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    content: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    /// Read leniently: servers that do not cache prompts leave it out or fill it oddly.
    prompt_tokens_details: Option<serde_json::Value>,
}

impl WireUsage {
    /// `prompt_tokens_details.cached_tokens` (OpenAI, llama.cpp's server), 0 when absent or not a count.
    fn cached_tokens(&self) -> u64 {
        self.prompt_tokens_details.as_ref().and_then(|d| d.get("cached_tokens")).and_then(|v| v.as_u64()).unwrap_or(0)
    }
}

#[derive(Debug, Deserialize)]
struct WireLogprobs {
    content: Option<Vec<WireTokenLogprob>>,
}

#[derive(Debug, Deserialize)]
struct WireTokenLogprob {
    token: String,
    logprob: f32,
    #[serde(default)]
    top_logprobs: Vec<WireTopLogprob>,
}

#[derive(Debug, Deserialize)]
struct WireTopLogprob {
    token: String,
    logprob: f32,
}

/// Reads a 2xx body. `Err` holds a short reason why the body is not a usable chat completion.
pub(crate) fn parse_response(body: &[u8]) -> Result<ChatResponse, String> {
    let wire: WireResponse =
        serde_json::from_slice(body).map_err(|e| format!("not a chat-completion JSON object ({e})"))?;
    let mut choices = wire.choices.ok_or("no `choices` in the response")?;
    if choices.is_empty() {
        return Err("empty `choices` in the response".into());
    }
    choices.sort_by_key(|c| c.index.unwrap_or(0));
    let completions = choices
        .into_iter()
        .map(|choice| {
            let text = match (choice.message, choice.text) {
                (Some(message), _) => message.content.unwrap_or_default(),
                (None, Some(text)) => text,
                (None, None) => return Err("a choice without `message`".to_string()),
            };
            let (top_logprobs, token_logprobs) = choice.logprobs.map(read_logprobs).unwrap_or_default();
            Ok(Completion { text, finish_reason: choice.finish_reason, top_logprobs, token_logprobs })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let usage = wire.usage.unwrap_or_default();
    Ok(ChatResponse {
        choices: completions,
        usage: Usage {
            prompt_tokens: usage.prompt_tokens.unwrap_or(0),
            completion_tokens: usage.completion_tokens.unwrap_or(0),
            cached_prompt_tokens: usage.cached_tokens(),
        },
        grammar_used: false,
        timing: None,
    })
}

/// Tokens with their log-probabilities.
type TokenLogprobs = Vec<(String, f32)>;

/// The candidates for the first generated token (the chosen one always among them), and every
/// generated token with its log-probability.
fn read_logprobs(value: serde_json::Value) -> (TokenLogprobs, TokenLogprobs) {
    let Ok(logprobs) = serde_json::from_value::<WireLogprobs>(value) else {
        return (Vec::new(), Vec::new());
    };
    let tokens = logprobs.content.unwrap_or_default();
    let chosen: TokenLogprobs = tokens.iter().map(|t| (t.token.clone(), t.logprob)).collect();
    let Some(first) = tokens.into_iter().next() else {
        return (Vec::new(), chosen);
    };
    let mut candidates: TokenLogprobs = first.top_logprobs.into_iter().map(|t| (t.token, t.logprob)).collect();
    // llama.cpp reports alternatives from before grammar constraints, which may leave out the token it
    // actually chose; keep the chosen one in the list so callers can always find it.
    if !candidates.iter().any(|(token, _)| *token == first.token) {
        candidates.push((first.token, first.logprob));
    }
    (candidates, chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_choices_in_index_order_with_usage() {
        let body = br#"{"choices":[
            {"index":1,"message":{"role":"assistant","content":"b"},"finish_reason":"length"},
            {"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}"#;
        let r = parse_response(body).unwrap();
        assert_eq!(r.choices.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(r.choices[0].finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.usage, Usage::new(7, 2));
    }

    #[test]
    fn cached_prompt_tokens_are_read_from_the_usage_details() {
        let body = br#"{"choices":[{"message":{"content":"a"}}],
            "usage":{"prompt_tokens":90,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":64}}}"#;
        let r = parse_response(body).unwrap();
        assert_eq!(r.usage, Usage { prompt_tokens: 90, completion_tokens: 2, cached_prompt_tokens: 64 });
        for odd in [r#"{"cached_tokens":"many"}"#, r#"null"#, r#"{"cached_tokens":-3}"#, r#"[]"#] {
            let body = format!(
                r#"{{"choices":[{{"message":{{"content":"a"}}}}],"usage":{{"prompt_tokens":5,"prompt_tokens_details":{odd}}}}}"#
            );
            let r = parse_response(body.as_bytes()).unwrap();
            assert_eq!(r.usage, Usage::new(5, 0), "{odd}");
        }
    }

    #[test]
    fn missing_usage_and_null_content_are_tolerated() {
        let r = parse_response(br#"{"choices":[{"message":{"content":null}}]}"#).unwrap();
        assert_eq!(r.text(), "");
        assert_eq!(r.usage, Usage::default());
        let r = parse_response(br#"{"choices":[{"text":"legacy"}],"usage":{"prompt_tokens":null}}"#).unwrap();
        assert_eq!(r.text(), "legacy");
    }

    #[test]
    fn garbage_is_rejected_with_a_reason() {
        assert!(parse_response(b"<html>502 Bad Gateway</html>").unwrap_err().contains("not a chat-completion"));
        assert!(parse_response(br#"{"error":{"message":"x"}}"#).unwrap_err().contains("no `choices`"));
        assert!(parse_response(br#"{"choices":[]}"#).unwrap_err().contains("empty"));
        assert!(parse_response(br#"{"choices":"nope"}"#).is_err());
        assert!(parse_response(br#"{"choices":[{"index":0}]}"#).unwrap_err().contains("without `message`"));
        assert!(parse_response(b"").is_err());
    }

    #[test]
    fn first_token_logprobs_are_read_and_odd_ones_ignored() {
        let body = br#"{"choices":[{"message":{"content":"yes"},"logprobs":{"content":[
            {"token":"yes","logprob":-0.1,"top_logprobs":[{"token":"yes","logprob":-0.1},{"token":"no","logprob":-2.5}]},
            {"token":"!","logprob":-0.3,"top_logprobs":[]}]}}]}"#;
        let r = parse_response(body).unwrap();
        assert_eq!(r.choices[0].top_logprobs, vec![("yes".to_string(), -0.1), ("no".to_string(), -2.5)]);
        // Every generated token, in order, with the log-probability it was chosen at.
        assert_eq!(r.choices[0].token_logprobs, vec![("yes".to_string(), -0.1), ("!".to_string(), -0.3)]);

        let only_chosen =
            br#"{"choices":[{"message":{"content":"x"},"logprobs":{"content":[{"token":"x","logprob":-1.0}]}}]}"#;
        assert_eq!(parse_response(only_chosen).unwrap().choices[0].top_logprobs, vec![("x".to_string(), -1.0)]);

        let chosen_outside_top = br#"{"choices":[{"message":{"content":"no"},"logprobs":{"content":[
            {"token":"n","logprob":-6.3,"top_logprobs":[{"token":"I","logprob":-2.2}]}]}}]}"#;
        assert_eq!(
            parse_response(chosen_outside_top).unwrap().choices[0].top_logprobs,
            vec![("I".to_string(), -2.2), ("n".to_string(), -6.3)]
        );

        let odd = br#"{"choices":[{"message":{"content":"x"},"logprobs":{"content":"weird"}}]}"#;
        let r = parse_response(odd).unwrap();
        assert_eq!(r.text(), "x");
        assert!(r.choices[0].top_logprobs.is_empty() && r.choices[0].token_logprobs.is_empty());
    }

    #[test]
    fn request_omits_empty_and_default_fields() {
        let messages = [ChatMessage::user("hi")];
        let req = WireRequest {
            model: "m",
            messages: &messages,
            temperature: 0.5,
            top_p: 1.0,
            max_tokens: 16,
            stop: &[],
            seed: None,
            n: None,
            logprobs: false,
            top_logprobs: None,
            grammar: None,
            response_format: None,
        };
        let v = serde_json::to_value(&req).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["max_tokens", "messages", "model", "temperature", "top_p"]);
        assert_eq!(v["messages"][0]["role"], "user");
    }
}
