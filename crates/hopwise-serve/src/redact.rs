//! Backend failures, as clients see them. A failed model or retrieval call is recorded in the trace
//! with the backend's own message (its address, the start of its error body) and the notes quote it;
//! a client gets the fact that a call failed, and the server log gets the message.

use hopwise_core::{Event, EventKind, Trace};

/// What a client reads in place of a backend's error message.
pub const HIDDEN: &str = "backend call failed (details in the server log)";

/// The backend messages seen so far in one question's events, to scrub them from later notes.
#[derive(Default)]
pub struct Redactor {
    /// Longest first, so a message that quotes another ("not retried: …") is replaced whole.
    seen: Vec<String>,
}

impl Redactor {
    /// Replaces the backend message of a failed call, remembering it, and scrubs known messages from
    /// a note. Other events pass unchanged.
    pub fn event(&mut self, event: &mut Event) {
        match &mut event.kind {
            EventKind::LlmCall { error: Some(message), .. } | EventKind::Retrieval { error: Some(message), .. }
                if *message != HIDDEN =>
            {
                let original = std::mem::replace(message, HIDDEN.to_string());
                self.remember(original);
            }
            EventKind::Note { message } => *message = self.scrub(message),
            _ => {}
        }
    }

    fn remember(&mut self, message: String) {
        if !message.is_empty() && !self.seen.contains(&message) {
            self.seen.push(message);
            self.seen.sort_by_key(|m| std::cmp::Reverse(m.len()));
        }
    }

    fn scrub(&self, text: &str) -> String {
        self.seen.iter().fold(text.to_string(), |acc, message| acc.replace(message.as_str(), HIDDEN))
    }
}

/// The trace without backend messages: in its events, its notes, and the final event.
pub fn trace(trace: &mut Trace) {
    let mut redactor = Redactor::default();
    for event in &mut trace.events {
        redactor.event(event);
    }
    for note in &mut trace.notes {
        *note = redactor.scrub(note);
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::Recorder;

    use super::*;

    #[test]
    fn backend_messages_leave_events_and_notes() {
        let secret = "openai:m: Server: POST http://10.0.0.7:8000/v1/chat/completions failed: HTTP 500: stack trace";
        let rec = Recorder::new("q", "direct");
        rec.event(
            None,
            0,
            EventKind::LlmCall {
                purpose: "answer".into(),
                n: 1,
                prompt_tokens: 0,
                completion_tokens: 0,
                input_words: 1,
                output_words: 0,
                grammar: false,
                error: Some(secret.into()),
                cached_prompt_tokens: 0,
                timing: None,
            },
        );
        rec.best_effort(format!("the strategy stopped early: {secret}"));
        let mut t = rec.finish("", None);
        assert_eq!(t.first_backend_failure(), Some(secret));
        trace(&mut t);
        let text = serde_json::to_string(&t).expect("json");
        assert!(!text.contains("10.0.0.7") && !text.contains("stack trace"), "{text}");
        assert!(
            t.notes[0].starts_with("the strategy stopped early: ") && t.notes[0].ends_with(HIDDEN),
            "{:?}",
            t.notes
        );
    }
}
