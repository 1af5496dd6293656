//! One chat turn with a local model: prints the completions, usage and timing.
//!
//! cargo run --release -p hopwise-llama --example chat -- MODEL "prompt" [n] [temperature] [grammar name]

use hopwise_core::{ChatMessage, ChatRequest, GenParams};
use hopwise_llama::{default_home, ensure_model, grammars, LocalConfig, LocalLlm};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().cloned().unwrap_or_else(|| hopwise_llama::TEST_MODEL.into());
    let prompt = args.get(1).cloned().unwrap_or_else(|| "Who directed the film Jaws?".into());
    let n = args.get(2).map(|value| value.parse()).transpose()?.unwrap_or(1);
    let temperature = args.get(3).map(|value| value.parse()).transpose()?.unwrap_or(0.0);
    let grammar = args.get(4).and_then(|name| grammars::by_name(name)).map(str::to_string);
    let path = ensure_model(&model, &default_home(), &mut |event| eprintln!("{event:?}"))?;
    let llm = LocalLlm::load(path, LocalConfig::default())?;
    eprintln!("{:?}", llm.info());
    let params = GenParams { n, temperature, top_p: 0.95, logprobs: true, grammar, ..GenParams::default() };
    let generation = llm.generate_blocking(&ChatRequest::new(vec![ChatMessage::user(prompt)], params))?;
    for (index, choice) in generation.response.choices.iter().enumerate() {
        println!("--- {index} ({:?})\n{}", choice.finish_reason, choice.text);
    }
    println!("--- top logprobs of the first token: {:?}", generation.response.choices[0].top_logprobs);
    println!("--- usage {:?}\n--- timing {:?}", generation.response.usage, generation.timing);
    Ok(())
}
