//! Chat prompts from the model's own template.
//!
//! The GGUF metadata carries the model's Jinja chat template. We render it with minijinja the way
//! Hugging Face does (trim_blocks, lstrip_blocks), so model-specific details survive — Qwen's template,
//! for one, inserts a default system message that llama.cpp's built-in template matcher leaves out.
//! Models without a template get ChatML.

use hopwise_core::{ChatMessage, Role};
use minijinja::{context, Environment, Error as JinjaError, ErrorKind};

/// Which renderer produced a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplateSource {
    /// The Jinja template from the GGUF metadata.
    Gguf,
    /// llama.cpp's built-in matcher for the GGUF template (used when Jinja rendering fails).
    LlamaBuiltin,
    /// No template in the file: ChatML.
    ChatMlFallback,
}

pub(crate) fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// Renders `template` for `messages`, ending with the assistant's turn opened.
pub fn render_jinja(template: &str, messages: &[ChatMessage], bos: &str, eos: &str) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.add_function("raise_exception", |message: String| -> Result<String, JinjaError> {
        Err(JinjaError::new(ErrorKind::InvalidOperation, message))
    });
    let messages: Vec<_> = messages
        .iter()
        .map(|message| context! { role => role_name(message.role), content => message.content.as_str() })
        .collect();
    env.render_str(
        template,
        context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => bos,
            eos_token => eos,
        },
    )
    .map_err(|err| err.to_string())
}

/// ChatML, the format of Qwen and SmolLM2, for models that carry no template.
pub fn render_chatml(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for message in messages {
        out.push_str("<|im_start|>");
        out.push_str(role_name(message.role));
        out.push('\n');
        out.push_str(&message.content);
        out.push_str("<|im_end|>\n");
    }
    out.push_str("<|im_start|>assistant\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of Qwen2.5's template (written for this test): a default system turn when none is given.
    const QWEN_LIKE: &str = "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\nDefault persona.<|im_end|>\\n' }}\n{%- endif %}\n{%- for message in messages %}\n    {%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or (message.role == 'assistant' and not message.tool_calls) %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n";

    #[test]
    fn renders_the_default_system_turn_of_a_qwen_like_template() {
        let prompt = render_jinja(QWEN_LIKE, &[ChatMessage::user("Hi?")], "", "").unwrap();
        assert_eq!(
            prompt,
            "<|im_start|>system\nDefault persona.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\n"
        );
        let with_system =
            render_jinja(QWEN_LIKE, &[ChatMessage::system("Be brief."), ChatMessage::user("Hi?")], "", "").unwrap();
        assert!(with_system.starts_with("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user"));
        assert!(!with_system.contains("Default persona"));
    }

    #[test]
    fn template_errors_are_reported_not_panicked() {
        let err = render_jinja("{{ raise_exception('no system role') }}", &[ChatMessage::user("x")], "", "");
        assert!(err.unwrap_err().contains("no system role"));
        assert!(render_jinja("{% for %}", &[], "", "").is_err());
    }

    #[test]
    fn chatml_fallback_opens_the_assistant_turn() {
        let prompt = render_chatml(&[ChatMessage::system("S"), ChatMessage::user("U")]);
        assert_eq!(prompt, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    }
}
