//! From chat messages to prompt tokens: the model's chat template, then its tokenizer.

use hopwise_core::ChatMessage;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::token::LlamaToken;

use crate::error::{LlamaError, Result};
use crate::template::{self, role_name, TemplateSource};

/// How this model's prompts are rendered, decided once at load.
pub(crate) struct PromptFormat {
    template: Option<String>,
    pub source: TemplateSource,
    bos_text: String,
    eos_text: String,
}

impl PromptFormat {
    pub fn new(model: &LlamaModel) -> Self {
        let vocab = model.vocab();
        let special_text = |token: LlamaToken| {
            if token.0 < 0 || token.0 >= vocab.n_tokens() {
                return String::new();
            }
            String::from_utf8_lossy(&vocab.token_to_piece(token, true, None)).into_owned()
        };
        let bos_text = special_text(vocab.bos());
        let eos_text = special_text(vocab.eos());
        let template = model.chat_template(None).ok().and_then(|template| template.to_string().ok());
        let mut format = Self { template, source: TemplateSource::ChatMlFallback, bos_text, eos_text };
        format.source = format.pick(model);
        format
    }

    /// Decides, on a probe conversation, which renderer this model's template works with.
    fn pick(&self, model: &LlamaModel) -> TemplateSource {
        let Some(source) = &self.template else {
            return TemplateSource::ChatMlFallback;
        };
        let probe = [ChatMessage::system("s"), ChatMessage::user("u")];
        if template::render_jinja(source, &probe, &self.bos_text, &self.eos_text).is_ok() {
            TemplateSource::Gguf
        } else if render_builtin(model, &probe).is_ok() {
            TemplateSource::LlamaBuiltin
        } else {
            TemplateSource::ChatMlFallback
        }
    }

    pub fn render(&self, model: &LlamaModel, messages: &[ChatMessage]) -> Result<String> {
        match (self.source, &self.template) {
            (TemplateSource::Gguf, Some(source)) => {
                template::render_jinja(source, messages, &self.bos_text, &self.eos_text).map_err(LlamaError::Template)
            }
            (TemplateSource::LlamaBuiltin, _) => render_builtin(model, messages),
            _ => Ok(template::render_chatml(messages)),
        }
    }

    pub fn tokenize(&self, model: &LlamaModel, text: &str) -> Vec<LlamaToken> {
        let vocab = model.vocab();
        // Templates that write the BOS text themselves must not get a second one.
        let add_special = vocab.should_add_bos() && (self.bos_text.is_empty() || !text.starts_with(&self.bos_text));
        vocab.tokenize(text.as_bytes(), add_special, true)
    }
}

fn render_builtin(model: &LlamaModel, messages: &[ChatMessage]) -> Result<String> {
    let template = model.chat_template(None).map_err(|err| LlamaError::Template(err.to_string()))?;
    let chat = messages
        .iter()
        .map(|message| LlamaChatMessage::new(role_name(message.role).to_string(), message.content.clone()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|err| LlamaError::Template(err.to_string()))?;
    model.apply_chat_template(&template, &chat, true).map_err(|err| LlamaError::Template(err.to_string()))
}
