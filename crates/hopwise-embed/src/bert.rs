//! A BERT encoder forward pass (inference only) over `safetensors` weights, with mean pooling.
//!
//! Sequences of a batch are *packed*: their tokens are stacked into one `[tokens x hidden]` matrix with
//! no padding rows, so the dense layers never compute on padding, and attention runs per sequence on
//! its own rows. That is the same arithmetic as a padded batch with an attention mask (padded keys get
//! weight 0 there), without the wasted work.

use std::path::Path;

use serde::Deserialize;

use crate::error::{EmbedError, Result};
use crate::int8::{Int8Linear, QuantizedRows};
use crate::kernels::{gelu, l2_normalize, layer_norm, matmul, softmax_rows, MatMut, MatRef};

/// The fields of a Hugging Face `config.json` that this encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f32,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_position_type")]
    pub position_embedding_type: String,
}

fn default_act() -> String {
    "gelu".into()
}

fn default_position_type() -> String {
    "absolute".into()
}

impl BertConfig {
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| EmbedError::io(path, e))?;
        let config: Self = serde_json::from_str(&text)
            .map_err(|e| EmbedError::Config { path: path.into(), message: e.to_string() })?;
        let bad = |message: String| EmbedError::Config { path: path.into(), message };
        if config.hidden_act != "gelu" {
            return Err(bad(format!("hidden_act `{}` is not supported (only `gelu`)", config.hidden_act)));
        }
        if config.position_embedding_type != "absolute" {
            return Err(bad(format!("position_embedding_type `{}` is not supported", config.position_embedding_type)));
        }
        if config.hidden_size.checked_rem(config.num_attention_heads) != Some(0) {
            return Err(bad("hidden_size is not a multiple of num_attention_heads".into()));
        }
        if config.type_vocab_size == 0 || config.max_position_embeddings == 0 {
            return Err(bad("empty type or position vocabulary".into()));
        }
        Ok(config)
    }

    fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// `y = x W^T + b` with PyTorch's `[out x in]` weight layout.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    input: usize,
    output: usize,
}

impl Linear {
    /// Writes `x W^T + b` for `rows` rows of `x` into `out` (`rows x output`).
    fn forward(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        let out = &mut out[..rows * self.output];
        for row in out.chunks_exact_mut(self.output) {
            row.copy_from_slice(&self.bias);
        }
        let w = MatRef::dense(&self.weight, self.output, self.input).t();
        matmul(
            1.0,
            MatRef::dense(&x[..rows * self.input], rows, self.input),
            w,
            1.0,
            MatMut::dense(out, rows, self.output),
        );
    }
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

impl Linear {
    fn int8(&self) -> Result<Int8Linear> {
        Int8Linear::new(&self.weight, &self.bias, self.output, self.input).ok_or_else(|| {
            EmbedError::Weights(format!("a {}-wide layer cannot be quantized in blocks of 32", self.input))
        })
    }
}

/// The int8 copies of a layer's four linear maps (the f32 ones stay for short inputs).
struct Int8Layer {
    qkv: Int8Linear,
    attention_out: Int8Linear,
    ffn_in: Int8Linear,
    ffn_out: Int8Linear,
}

struct Layer {
    /// Query, key and value projections fused into one `[3*hidden x hidden]` weight.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    ffn_in: Linear,
    ffn_out: Linear,
    ffn_norm: Norm,
}

/// BERT weights in memory (f32) plus the config they were checked against.
pub struct BertModel {
    config: BertConfig,
    word_embeddings: Vec<f32>,
    position_embeddings: Vec<f32>,
    /// Row 0 of the token-type table: single-sentence inputs only ever use type 0.
    token_type_row: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    /// Present when the model was loaded for int8 inference ([`BertModel::quantize`]).
    int8_layers: Option<Vec<Int8Layer>>,
}

/// Reusable buffers for one worker thread, grown on demand.
#[derive(Default)]
pub struct Scratch {
    hidden: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    intermediate: Vec<f32>,
    scores: Vec<f32>,
    quantized: QuantizedRows,
}

fn grow(buf: &mut Vec<f32>, len: usize) {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
}

struct WeightReader<'a> {
    tensors: safetensors::SafeTensors<'a>,
}

impl WeightReader<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let view = self.tensors.tensor(name).map_err(|e| EmbedError::Weights(format!("{name}: {e}")))?;
        if view.dtype() != safetensors::Dtype::F32 {
            return Err(EmbedError::Weights(format!("{name}: dtype {:?}, expected F32", view.dtype())));
        }
        if view.shape() != shape {
            return Err(EmbedError::Weights(format!("{name}: shape {:?}, expected {shape:?}", view.shape())));
        }
        Ok(view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }

    fn linear(&self, prefix: &str, output: usize, input: usize) -> Result<Linear> {
        Ok(Linear {
            weight: self.get(&format!("{prefix}.weight"), &[output, input])?,
            bias: self.get(&format!("{prefix}.bias"), &[output])?,
            input,
            output,
        })
    }

    fn norm(&self, prefix: &str, width: usize) -> Result<Norm> {
        Ok(Norm {
            gamma: self.get(&format!("{prefix}.weight"), &[width])?,
            beta: self.get(&format!("{prefix}.bias"), &[width])?,
        })
    }
}

/// Concatenates linear layers along the output dimension (rows of the weight).
fn fuse(parts: [Linear; 3]) -> Linear {
    let input = parts[0].input;
    let output = parts.iter().map(|p| p.output).sum();
    let mut weight = Vec::with_capacity(output * input);
    let mut bias = Vec::with_capacity(output);
    for p in parts {
        weight.extend_from_slice(&p.weight);
        bias.extend_from_slice(&p.bias);
    }
    Linear { weight, bias, input, output }
}

impl BertModel {
    /// Loads weights named as in Hugging Face's `BertModel` (an optional `bert.` prefix is accepted).
    pub fn load(config: BertConfig, weights_path: &Path) -> Result<Self> {
        let bytes = std::fs::read(weights_path).map_err(|e| EmbedError::io(weights_path, e))?;
        let tensors = safetensors::SafeTensors::deserialize(&bytes)
            .map_err(|e| EmbedError::Weights(format!("{}: {e}", weights_path.display())))?;
        let prefix = if tensors.names().iter().any(|n| n.starts_with("bert.")) { "bert." } else { "" };
        let r = WeightReader { tensors };
        let h = config.hidden_size;
        let word_embeddings = r.get(&format!("{prefix}embeddings.word_embeddings.weight"), &[config.vocab_size, h])?;
        let position_embeddings =
            r.get(&format!("{prefix}embeddings.position_embeddings.weight"), &[config.max_position_embeddings, h])?;
        let mut token_type_row =
            r.get(&format!("{prefix}embeddings.token_type_embeddings.weight"), &[config.type_vocab_size, h])?;
        token_type_row.truncate(h);
        let embedding_norm = r.norm(&format!("{prefix}embeddings.LayerNorm"), h)?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("{prefix}encoder.layer.{i}");
            layers.push(Layer {
                qkv: fuse([
                    r.linear(&format!("{p}.attention.self.query"), h, h)?,
                    r.linear(&format!("{p}.attention.self.key"), h, h)?,
                    r.linear(&format!("{p}.attention.self.value"), h, h)?,
                ]),
                attention_out: r.linear(&format!("{p}.attention.output.dense"), h, h)?,
                attention_norm: r.norm(&format!("{p}.attention.output.LayerNorm"), h)?,
                ffn_in: r.linear(&format!("{p}.intermediate.dense"), config.intermediate_size, h)?,
                ffn_out: r.linear(&format!("{p}.output.dense"), h, config.intermediate_size)?,
                ffn_norm: r.norm(&format!("{p}.output.LayerNorm"), h)?,
            });
        }
        Ok(Self {
            config,
            word_embeddings,
            position_embeddings,
            token_type_row,
            embedding_norm,
            layers,
            int8_layers: None,
        })
    }

    /// Adds int8 copies of every encoder matrix, so [`embed`](Self::embed) can run with `int8`.
    pub fn quantize(&mut self) -> Result<()> {
        let layers = self
            .layers
            .iter()
            .map(|l| {
                Ok(Int8Layer {
                    qkv: l.qkv.int8()?,
                    attention_out: l.attention_out.int8()?,
                    ffn_in: l.ffn_in.int8()?,
                    ffn_out: l.ffn_out.int8()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.int8_layers = Some(layers);
        Ok(())
    }

    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// Mean-pooled (over all tokens, special ones included, as sentence-transformers does) and
    /// L2-normalised embeddings, one per token sequence. Sequences must be non-empty, no longer than
    /// `max_position_embeddings`, with ids inside the vocabulary. With `int8` (and after
    /// [`quantize`](Self::quantize)) the encoder's matrix products run in int8.
    pub fn embed(&self, sequences: &[&[u32]], scratch: &mut Scratch, int8: bool) -> Result<Vec<Vec<f32>>> {
        let int8_layers = match (int8, &self.int8_layers) {
            (false, _) => None,
            (true, Some(layers)) => Some(layers),
            (true, None) => return Err(EmbedError::Weights("int8 inference asked of a model loaded in f32".into())),
        };
        let c = &self.config;
        let h = c.hidden_size;
        for s in sequences {
            if s.is_empty() || s.len() > c.max_position_embeddings {
                return Err(EmbedError::Tokenizer(format!(
                    "sequence of {} tokens (must be 1..={})",
                    s.len(),
                    c.max_position_embeddings
                )));
            }
            if let Some(bad) = s.iter().find(|&&id| id as usize >= c.vocab_size) {
                return Err(EmbedError::Tokenizer(format!(
                    "token id {bad} outside the vocabulary of {}",
                    c.vocab_size
                )));
            }
        }
        let tokens: usize = sequences.iter().map(|s| s.len()).sum();
        let max_len = sequences.iter().map(|s| s.len()).max().unwrap_or(0);
        grow(&mut scratch.hidden, tokens * h);
        grow(&mut scratch.qkv, tokens * 3 * h);
        grow(&mut scratch.context, tokens * h);
        grow(&mut scratch.projected, tokens * h);
        grow(&mut scratch.intermediate, tokens * c.intermediate_size);
        grow(&mut scratch.scores, max_len * max_len);

        self.embed_tokens(sequences, &mut scratch.hidden[..tokens * h]);
        for (i, layer) in self.layers.iter().enumerate() {
            let quantized = int8_layers.map(|layers| &layers[i]);
            self.attention(layer, quantized, sequences, tokens, scratch);
            self.feed_forward(layer, quantized, tokens, scratch);
        }

        let mut out = Vec::with_capacity(sequences.len());
        let mut start = 0;
        for s in sequences {
            let rows = &scratch.hidden[start * h..(start + s.len()) * h];
            let mut pooled = vec![0.0f32; h];
            for row in rows.chunks_exact(h) {
                pooled.iter_mut().zip(row).for_each(|(p, v)| *p += v);
            }
            let inv = 1.0 / s.len() as f32;
            pooled.iter_mut().for_each(|p| *p *= inv);
            l2_normalize(&mut pooled);
            out.push(pooled);
            start += s.len();
        }
        Ok(out)
    }

    fn embed_tokens(&self, sequences: &[&[u32]], hidden: &mut [f32]) {
        let h = self.config.hidden_size;
        let mut rows = hidden.chunks_exact_mut(h);
        for s in sequences {
            for (pos, &id) in s.iter().enumerate() {
                let Some(row) = rows.next() else { return };
                let word = &self.word_embeddings[id as usize * h..(id as usize + 1) * h];
                let position = &self.position_embeddings[pos * h..(pos + 1) * h];
                for (i, v) in row.iter_mut().enumerate() {
                    *v = word[i] + position[i] + self.token_type_row[i];
                }
            }
        }
        layer_norm(hidden, h, &self.embedding_norm.gamma, &self.embedding_norm.beta, self.config.layer_norm_eps);
    }

    fn attention(&self, layer: &Layer, q8: Option<&Int8Layer>, sequences: &[&[u32]], tokens: usize, s: &mut Scratch) {
        let c = &self.config;
        let (h, d) = (c.hidden_size, c.head_dim());
        let scale = 1.0 / (d as f32).sqrt();
        apply(&layer.qkv, q8.map(|l| &l.qkv), &s.hidden[..tokens * h], tokens, &mut s.qkv, &mut s.quantized);
        let qkv = &s.qkv[..tokens * 3 * h];
        let mut start = 0;
        for seq in sequences {
            let len = seq.len();
            let rows = &qkv[start * 3 * h..(start + len) * 3 * h];
            let context = &mut s.context[start * h..(start + len) * h];
            let scores = &mut s.scores[..len * len];
            for head in 0..c.num_attention_heads {
                let view = |offset: usize| MatRef {
                    data: &rows[offset + head * d..],
                    rows: len,
                    cols: d,
                    row_stride: 3 * h,
                    col_stride: 1,
                };
                let (q, k, v) = (view(0), view(h), view(2 * h));
                matmul(scale, q, k.t(), 0.0, MatMut::dense(scores, len, len));
                softmax_rows(scores, len);
                let out = MatMut { data: &mut context[head * d..], rows: len, cols: d, row_stride: h, col_stride: 1 };
                matmul(1.0, MatRef::dense(scores, len, len), v, 0.0, out);
            }
            start += len;
        }
        let attention_out = q8.map(|l| &l.attention_out);
        apply(
            &layer.attention_out,
            attention_out,
            &s.context[..tokens * h],
            tokens,
            &mut s.projected,
            &mut s.quantized,
        );
        let hidden = &mut s.hidden[..tokens * h];
        hidden.iter_mut().zip(&s.projected[..tokens * h]).for_each(|(x, p)| *x += p);
        layer_norm(hidden, h, &layer.attention_norm.gamma, &layer.attention_norm.beta, c.layer_norm_eps);
    }

    fn feed_forward(&self, layer: &Layer, q8: Option<&Int8Layer>, tokens: usize, s: &mut Scratch) {
        let c = &self.config;
        let (h, wide) = (c.hidden_size, c.intermediate_size);
        apply(
            &layer.ffn_in,
            q8.map(|l| &l.ffn_in),
            &s.hidden[..tokens * h],
            tokens,
            &mut s.intermediate,
            &mut s.quantized,
        );
        gelu(&mut s.intermediate[..tokens * wide]);
        let ffn_out = q8.map(|l| &l.ffn_out);
        apply(&layer.ffn_out, ffn_out, &s.intermediate[..tokens * wide], tokens, &mut s.projected, &mut s.quantized);
        let hidden = &mut s.hidden[..tokens * h];
        hidden.iter_mut().zip(&s.projected[..tokens * h]).for_each(|(x, p)| *x += p);
        layer_norm(hidden, h, &layer.ffn_norm.gamma, &layer.ffn_norm.beta, c.layer_norm_eps);
    }
}

/// One linear map: through its int8 copy when there is one, in f32 otherwise.
fn apply(
    f32_layer: &Linear,
    int8: Option<&Int8Linear>,
    x: &[f32],
    rows: usize,
    out: &mut [f32],
    q: &mut QuantizedRows,
) {
    match int8 {
        Some(layer) => {
            q.quantize(x, rows, layer.input());
            layer.forward(q, out);
        }
        None => f32_layer.forward(x, rows, out),
    }
}
