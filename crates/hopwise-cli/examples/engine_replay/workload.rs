//! The recorded workload: every model request of a run, with when it started and ended relative to
//! the start of its question, one JSON object per line.

use std::io::{BufRead, Write};
use std::path::Path;

use hopwise_core::{CallTiming, ChatRequest, Prompts};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Call {
    /// Index of the question in the recording.
    pub question: usize,
    /// Order of the call's start within its question.
    pub index: usize,
    /// The prompt template the request was made from (`toqd_critique`, …), or `?`.
    pub purpose: String,
    pub start_ms: f64,
    pub end_ms: f64,
    pub request: ChatRequest,
    pub prompt_tokens: u64,
    pub cached_prompt_tokens: u64,
    pub completion_tokens: u64,
    pub text: String,
    pub timing: Option<CallTiming>,
}

impl Call {
    /// Calls of the same question that ended before this one started: the replay waits for them.
    pub fn depends_on(&self, other: &Call) -> bool {
        other.question == self.question && other.end_ms <= self.start_ms
    }
}

pub fn write(path: &Path, calls: &[Call]) -> Result<(), Box<dyn std::error::Error>> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for call in calls {
        serde_json::to_writer(&mut out, call)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

pub fn read(path: &Path) -> Result<Vec<Call>, Box<dyn std::error::Error>> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut calls = Vec::new();
    for (number, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        calls.push(serde_json::from_str(&line).map_err(|e| format!("{}:{}: {e}", path.display(), number + 1))?);
    }
    Ok(calls)
}

/// Which template a user prompt was rendered from: the one whose literal opening (up to its first
/// placeholder) the prompt starts with, the longest such opening winning.
pub fn purpose_of(prompts: &Prompts, user_prompt: &str) -> String {
    prompts
        .names()
        .filter_map(|name| {
            let text = prompts.template(name)?;
            let opening = text.split('{').next().unwrap_or("").trim();
            (opening.len() >= 12 && user_prompt.trim_start().starts_with(opening)).then_some((opening.len(), name))
        })
        .max()
        .map_or_else(|| "?".to_string(), |(_, name)| name.to_string())
}
