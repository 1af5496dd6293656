//! End-to-end tests on the real Qwen2.5-Coder-0.5B model, one inference thread.
//!
//! The model is loaded once and shared; its one worker thread serves all tests' requests (batched
//! together when they overlap). The model must be installed (`hopwise setup`, or `ensure_model`
//! with `qwen2.5-0.5b`): without it these tests fail, they do not skip. They assert on structure and
//! protocol, not on the wording of a small model.

use std::sync::OnceLock;

use hopwise_core::{BackendErrorKind, ChatMessage, ChatRequest, GenParams, Llm};
use hopwise_llama::{
    default_home, ensure_model, grammars, installed_model, LlamaError, LocalConfig, LocalLlm, TemplateSource,
    TEST_MODEL,
};

fn model_path() -> std::path::PathBuf {
    let home = default_home();
    installed_model(TEST_MODEL, &home).unwrap_or_else(|| {
        panic!(
            "{TEST_MODEL} is not installed under {}/models. Run `hopwise setup` (or scripts/setup.sh), \
             or set HOPWISE_HOME to a data dir that has it.",
            home.display()
        )
    })
}

fn model() -> &'static LocalLlm {
    static MODEL: OnceLock<LocalLlm> = OnceLock::new();
    MODEL.get_or_init(|| {
        let config = LocalConfig { threads: Some(1), ..LocalConfig::default() };
        LocalLlm::load(model_path(), config).expect("the installed test model loads")
    })
}

fn request(prompt: &str, params: GenParams) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(prompt)], params)
}

fn greedy(max_tokens: u32) -> GenParams {
    GenParams { temperature: 0.0, max_tokens, ..GenParams::default() }
}

#[tokio::test]
async fn answers_a_trivial_prompt_with_the_gguf_template() {
    let llm = model();
    assert_eq!(llm.info().template, TemplateSource::Gguf);
    assert_eq!(llm.info().threads, 1);
    let response = llm.chat(&request("What is 2 + 2? Reply with the number only.", greedy(8))).await.unwrap();
    assert_eq!(response.choices.len(), 1);
    assert!(response.text().contains('4'), "{:?}", response.text());
    assert!(response.usage.completion_tokens >= 1);
    assert!(!response.grammar_used);
    // Qwen's template adds its default system turn when the request has none, so the bare user turn
    // costs more prompt tokens than its text alone.
    let with_system = llm
        .chat(&ChatRequest::new(
            vec![ChatMessage::system("Be brief."), ChatMessage::user("What is 2 + 2? Reply with the number only.")],
            greedy(1),
        ))
        .await
        .unwrap();
    assert!(response.usage.prompt_tokens > with_system.usage.prompt_tokens);
}

#[tokio::test]
async fn samples_share_one_prompt_evaluation_and_follow_their_seeds() {
    // Its own engine: the shared one would batch this test's steps with other tests' sequences, and a
    // batch of another shape rounds the logits differently, enough to flip a sample at temperature 1.
    let config = LocalConfig { threads: Some(1), ..LocalConfig::default() };
    let llm = &LocalLlm::load(model_path(), config).expect("the installed test model loads");
    let prompt = "Invent a name for a new color and describe it in one sentence.";
    // Prompt lookup off and the prompt cached first, so every request below evaluates it the same way
    // (llama.cpp's rounding depends on how a prompt is split into batches).
    let params = GenParams {
        temperature: 1.0,
        top_p: 1.0,
        max_tokens: 10,
        n: 3,
        seed: Some(11),
        prompt_lookup: Some(false),
        ..GenParams::default()
    };
    llm.generate(&request(prompt, GenParams { n: 1, max_tokens: 1, ..params.clone() })).await.unwrap();
    let sampled = llm.generate(&request(prompt, params.clone())).await.unwrap();
    let single = llm.generate(&request(prompt, GenParams { n: 1, ..params.clone() })).await.unwrap();

    assert_eq!(sampled.response.choices.len(), 3);
    assert_eq!(sampled.response.usage.prompt_tokens, single.response.usage.prompt_tokens);
    let texts: Vec<&str> = sampled.response.choices.iter().map(|c| c.text.as_str()).collect();
    assert!(texts[0] != texts[1] && texts[1] != texts[2] && texts[0] != texts[2], "{texts:?}");
    let total: u64 = sampled.response.usage.completion_tokens;
    assert!((3..=30).contains(&total), "{total}");
    // Sample k uses seed + k, so the n = 1 request with the same seed reproduces sample 0.
    assert_eq!(single.response.choices[0].text, texts[0]);
}

fn numbered_lines(text: &str) -> Vec<String> {
    // Only complete lines: generation may stop at max_tokens mid-line.
    let complete = text.rsplit_once('\n').map(|(head, _)| head).unwrap_or("");
    complete.lines().map(str::to_string).collect()
}

#[tokio::test]
async fn grammars_force_numbered_lists_and_edges() {
    let llm = model();
    let params = GenParams { grammar: Some(grammars::NUMBERED_QUESTIONS.into()), ..greedy(48) };
    let response = llm
        .chat(&request(
            "Split this question into simpler sub-questions: Who was born first, the director of Jaws or the director of Alien?",
            params,
        ))
        .await
        .unwrap();
    assert!(response.grammar_used);
    let lines = numbered_lines(response.text());
    assert!(!lines.is_empty(), "{:?}", response.text());
    for (index, line) in lines.iter().enumerate() {
        let prefix = format!("{}. ", index + 1);
        assert!(line.starts_with(&prefix) && line.ends_with('?'), "{line:?} in {:?}", response.text());
    }

    let params = GenParams { grammar: Some(grammars::EDGES.into()), ..greedy(24) };
    let response = llm
        .chat(&request(
            "Main question (Q): Where was the director of Jaws born?\n1. Who directed Jaws?\n2. Where was that person born?\n\
             Write which answers are needed for which question, one per line as \"A -> B\".",
            params,
        ))
        .await
        .unwrap();
    let lines = numbered_lines(response.text());
    assert!(!lines.is_empty(), "{:?}", response.text());
    for line in lines {
        let (from, to) = line.split_once(" -> ").unwrap_or_else(|| panic!("{line:?}"));
        assert!(from.parse::<u32>().is_ok(), "{line:?}");
        assert!(to == "Q" || to.parse::<u32>().is_ok(), "{line:?}");
    }

    // ToQD's forward-only edges: llama.cpp accepts the grammar, and every edge points to a later
    // sub-question or to Q.
    let params = GenParams { grammar: Some(grammars::forward_edges_for(3)), ..greedy(32) };
    let response = llm
        .chat(&request(
            "Main question (Q): Who was born first, the director of Jaws or the director of Alien?\n1. Who directed Jaws?\n\
             2. Who directed Alien?\n3. Which of the two was born first?\n\
             Write which answers are needed for which question, one per line as \"A -> B\".",
            params,
        ))
        .await
        .unwrap();
    for line in response.text().lines().filter(|l| !l.trim().is_empty()) {
        let (from, to) = line.split_once(" -> ").unwrap_or_else(|| panic!("{line:?}"));
        let from: u32 = from.parse().unwrap_or_else(|_| panic!("{line:?}"));
        assert!(to == "Q" || to.parse::<u32>().is_ok_and(|to| to > from), "{line:?}");
    }
}

#[tokio::test]
async fn concurrent_requests_complete_and_share_decode_steps() {
    let llm = model();
    let busy = request("Name three rivers.", greedy(12));
    let fruit = request("Name a fruit. One word.", greedy(6));
    let animal = request("Name an animal. One word.", GenParams { n: 2, temperature: 0.8, seed: Some(3), ..greedy(6) });
    // The two later requests arrive while the worker is busy with the first; they join its decode
    // steps instead of waiting for it.
    let (busy, (fruit, animal)) = tokio::join!(llm.generate(&busy), async {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        tokio::join!(llm.generate(&fruit), llm.generate(&animal))
    });
    let (busy, fruit, animal) = (busy.unwrap(), fruit.unwrap(), animal.unwrap());
    assert_eq!(fruit.response.choices.len(), 1);
    assert_eq!(animal.response.choices.len(), 2);
    for generation in [&busy, &fruit, &animal] {
        for choice in &generation.response.choices {
            assert!(!choice.text.trim().is_empty());
            assert!(choice.finish_reason.is_some());
        }
        let timing = generation.response.timing.expect("the engine reports where the time went");
        assert_eq!(timing, generation.timing.call_timing());
        assert!(generation.timing.decode_steps >= 1);
    }
}

#[tokio::test]
async fn stop_strings_cut_the_text_and_logprobs_describe_the_first_token() {
    let llm = model();
    let params = GenParams { stop: vec!["3".into()], logprobs: true, ..greedy(40) };
    let response = llm.chat(&request("Count from 1 to 9, separated by commas.", params)).await.unwrap();
    let choice = &response.choices[0];
    assert!(!choice.text.contains('3'), "{:?}", choice.text);
    assert_eq!(choice.finish_reason.as_deref(), Some("stop"), "{:?}", choice.text);
    let top = &choice.top_logprobs;
    assert_eq!(top.len(), 5);
    assert!(top.windows(2).all(|pair| pair[0].1 >= pair[1].1));
    let mass: f32 = top.iter().map(|(_, logprob)| logprob.exp()).sum();
    assert!(top[0].1 <= 0.0 && mass <= 1.0 + 1e-4, "{top:?}");
    // Greedy decoding picks the most likely first token.
    assert!(choice.text.starts_with(top[0].0.as_str()) || top[0].0.trim().is_empty(), "{top:?} vs {:?}", choice.text);
    // Every generated token comes with the log-probability it was chosen at: the tokens spell the
    // text (up to the stop string), the first is the most likely candidate, none is above 0.
    let tokens = &choice.token_logprobs;
    let spelled: String = tokens.iter().map(|(token, _)| token.as_str()).collect();
    assert!(spelled.starts_with(choice.text.as_str()), "{spelled:?} vs {:?}", choice.text);
    assert!(tokens.iter().all(|(_, logprob)| *logprob <= 1e-6), "{tokens:?}");
    assert!((tokens[0].1 - top[0].1).abs() < 1e-3, "{tokens:?} vs {top:?}");
}

#[tokio::test]
async fn bad_inputs_give_clear_errors() {
    let llm = model();
    let long_prompt = "word ".repeat(6000);
    let err = llm.chat(&request(&long_prompt, greedy(4))).await.unwrap_err();
    assert_eq!(err.backend_kind(), Some(BackendErrorKind::Unsupported), "{err}");
    assert!(err.to_string().contains("context window"), "{err}");

    let params = GenParams { grammar: Some("root ::= (".into()), ..greedy(4) };
    let err = llm.generate(&request("hi", params)).await.unwrap_err();
    assert!(matches!(err, LlamaError::Grammar), "{err}");
    // The worker keeps serving after rejected requests.
    assert!(llm.chat(&request("Say hi.", greedy(2))).await.is_ok());

    let dir = tempfile::tempdir().unwrap();
    let truncated = dir.path().join("truncated.gguf");
    let header = {
        use std::io::Read;
        let mut bytes = vec![0u8; 4 << 20];
        let mut file = std::fs::File::open(model_path()).unwrap();
        file.read_exact(&mut bytes).unwrap();
        bytes
    };
    std::fs::write(&truncated, &header).unwrap();
    let err = LocalLlm::load(&truncated, LocalConfig::default()).unwrap_err();
    assert!(matches!(err, LlamaError::Truncated { .. }), "{err}");
    assert!(err.to_string().contains("truncated"), "{err}");

    let not_gguf = dir.path().join("notes.gguf");
    std::fs::write(&not_gguf, "these are notes, not weights").unwrap();
    let err = LocalLlm::load(&not_gguf, LocalConfig::default()).unwrap_err();
    assert!(matches!(err, LlamaError::NotGguf { .. }), "{err}");

    let err = LocalLlm::load(dir.path().join("missing.gguf"), LocalConfig::default()).unwrap_err();
    assert!(matches!(err, LlamaError::MissingFile { .. }), "{err}");

    let err = ensure_model("qwen9-404b", dir.path(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("qwen2.5-0.5b"), "{err}");

    // A name that is installed resolves without fetching anything.
    let mut events = Vec::new();
    let path = ensure_model(TEST_MODEL, &default_home(), &mut |event| events.push(event.clone())).unwrap();
    assert_eq!(path, model_path());
    assert_eq!(events, vec![hopwise_llama::SetupEvent::AlreadyInstalled { path }]);
}
