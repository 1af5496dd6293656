//! Turns configuration into live backends. Entry points that answer questions get them through
//! [`crate::build`]; indexing uses the embedder and remote stores directly.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hopwise_config::{Config, LlmConfig, RemoteConfig, RemoteMode, RetrieverKind};
use hopwise_core::{Embedder, Llm, Retriever};
use hopwise_embed::{
    embedder_model_dir, MiniLmEmbedder, MiniLmOptions, Precision, MINILM_INT8_MODEL_ID, MINILM_MODEL_ID,
};
use hopwise_index::{dense_model_id, Bm25Retriever, DenseRetriever, HybridRetriever};
use hopwise_llama::{LocalConfig, LocalLlm};
use hopwise_models::OpenAiLlm;
use hopwise_remote::{
    HttpOptions, MilvusConfig, MilvusStore, OpenSearchConfig, OpenSearchStore, RemoteRetriever, RemoteStore,
    SearchMode, TypesenseConfig, TypesenseStore,
};

/// The configured model backend. `progress` allows progress output on stderr (model loading).
pub async fn build_llm(config: &Config, progress: bool) -> Result<Arc<dyn Llm>> {
    match config.llm_config() {
        LlmConfig::Openai(cfg) => {
            let llm = OpenAiLlm::new(cfg.clone())
                .with_context(|| format!("model backend at {}", hopwise_models::redact_url(&cfg.base_url)))?;
            Ok(Arc::new(llm))
        }
        LlmConfig::Local { model, threads, context } => {
            let home = config.home_dir();
            let path = hopwise_llama::installed_model(model, &home)
                .or_else(|| std::path::Path::new(model).is_file().then(|| model.into()));
            let Some(path) = path else {
                bail!(
                    "model `{model}` is not installed in {}; run `hopwise setup --fetch {model}` (known models: {})",
                    home.display(),
                    hopwise_llama::registry::known_names()
                );
            };
            let local = LocalConfig { n_ctx: *context, threads: threads.map(|t| t as usize), ..LocalConfig::default() };
            if progress {
                eprintln!("loading {} ...", path.display());
            }
            let name = format!("local:{model}");
            let llm = tokio::task::spawn_blocking(move || LocalLlm::load(&path, local))
                .await
                .context("the model loader stopped")??
                .with_name(name);
            Ok(Arc::new(llm))
        }
    }
}

/// all-MiniLM-L6-v2 from `HOME/models/all-minilm-l6-v2`, or `None` when it is not installed. The
/// cheap file check keeps commands that merely could use it (HGOT) from failing without it. Its
/// precision matches the dense index of the configured index directory (see [`embed_precision`]).
pub fn installed_embedder(config: &Config) -> Result<Option<Arc<dyn Embedder>>> {
    installed_embedder_for(config, &config.index_dir())
}

/// Like [`installed_embedder`], matching the dense index in `index_dir`.
pub fn installed_embedder_for(config: &Config, index_dir: &Path) -> Result<Option<Arc<dyn Embedder>>> {
    let dir = embedder_model_dir(&config.home_dir());
    if !dir.join("model.safetensors").is_file() {
        return Ok(None);
    }
    // One thread setting for both backends: the local model's (`--threads`, `HOPWISE_THREADS`).
    let threads = match config.llm_config() {
        LlmConfig::Local { threads: Some(t), .. } => (*t as usize).max(1),
        _ => MiniLmOptions::default().threads,
    };
    let precision = embed_precision(index_dir)?;
    let embedder = MiniLmEmbedder::load(&dir, MiniLmOptions { threads, precision, ..MiniLmOptions::default() })
        .with_context(|| format!("loading the embedder from {}", dir.display()))?;
    Ok(Some(Arc::new(embedder)))
}

/// The embedder's arithmetic: `HOPWISE_EMBED_PRECISION` (`int8` or `f32`) when set; otherwise the
/// one the dense index in `index_dir` was built with, so an index keeps working with the precision
/// it has; otherwise int8 (the default for new indexes).
pub fn embed_precision(index_dir: &Path) -> Result<Precision> {
    if let Some(value) = std::env::var("HOPWISE_EMBED_PRECISION").ok().filter(|v| !v.trim().is_empty()) {
        return Precision::parse(&value)
            .with_context(|| format!("HOPWISE_EMBED_PRECISION={value}: expected `int8` or `f32`"));
    }
    // An unreadable dense index is reported when it is opened; here it just means "no preference".
    Ok(match dense_model_id(index_dir).ok().flatten().as_deref() {
        Some(MINILM_MODEL_ID) => Precision::F32,
        Some(MINILM_INT8_MODEL_ID) => Precision::Int8,
        _ => Precision::default(),
    })
}

/// The embedder, or an error saying how to install it.
pub fn require_embedder(config: &Config) -> Result<Arc<dyn Embedder>> {
    require_embedder_for(config, &config.index_dir())
}

/// Like [`require_embedder`], matching the dense index in `index_dir`.
pub fn require_embedder_for(config: &Config, index_dir: &Path) -> Result<Arc<dyn Embedder>> {
    installed_embedder_for(config, index_dir)?.with_context(|| {
        format!(
            "all-MiniLM-L6-v2 is not installed in {}; run `hopwise setup --fetch all-minilm-l6-v2`",
            config.home_dir().display()
        )
    })
}

/// The retriever named by config (`retriever`: bm25, dense or hybrid over the configured index —
/// `index`, `--index`, or the sample index —, or typesense, milvus, opensearch from `[remote]`).
pub async fn open_retriever(config: &Config) -> Result<Arc<dyn Retriever>> {
    let dir = config.index_dir();
    let bm25 = || -> Result<Arc<dyn Retriever>> { Ok(Arc::new(Bm25Retriever::open(&dir)?)) };
    let dense =
        || -> Result<Arc<dyn Retriever>> { Ok(Arc::new(DenseRetriever::open(&dir, require_embedder(config)?)?)) };
    Ok(match config.general.retriever {
        RetrieverKind::Bm25 => bm25()?,
        RetrieverKind::Dense => dense()?,
        RetrieverKind::Hybrid => Arc::new(HybridRetriever::new(bm25()?, dense()?)),
        remote @ (RetrieverKind::Typesense | RetrieverKind::Milvus | RetrieverKind::Opensearch) => {
            let engine = remote.name();
            let store = remote_store(config, engine)?;
            let default_mode = if remote == RetrieverKind::Milvus { SearchMode::Vector } else { SearchMode::Hybrid };
            let mode = match config.remote.mode {
                Some(RemoteMode::Text) => SearchMode::Text,
                Some(RemoteMode::Vector) => SearchMode::Vector,
                Some(RemoteMode::Hybrid) => SearchMode::Hybrid,
                None => default_mode,
            };
            let embedder = if mode == SearchMode::Text { None } else { Some(require_embedder(config)?) };
            let retriever = RemoteRetriever::open(store, embedder, mode)
                .await
                .with_context(|| format!("opening the {engine} retriever"))?;
            Arc::new(retriever)
        }
    })
}

/// A client for the remote engine `engine` as `[remote]`, flags and environment describe it.
pub fn remote_store(config: &Config, engine: &str) -> Result<Arc<dyn RemoteStore>> {
    let r = &config.remote;
    let http = HttpOptions {
        timeout: Duration::from_secs_f64(r.timeout_secs),
        retries: r.max_retries,
        ..HttpOptions::default()
    };
    let missing = |flag: &str, var: &str| {
        anyhow::anyhow!("the {engine} URL is not set; pass {flag}, set {var}, or set it in [remote] of hopwise.toml")
    };
    Ok(match engine {
        "typesense" => {
            let url = r.typesense_url.clone().ok_or_else(|| missing("--typesense-url", "HOPWISE_TYPESENSE_URL"))?;
            let api_key = RemoteConfig::secret(&r.typesense_api_key, &r.typesense_api_key_env)?.ok_or_else(|| {
                anyhow::anyhow!("Typesense needs an API key: set HOPWISE_TYPESENSE_API_KEY, pass --typesense-api-key, or name a variable in [remote] typesense_api_key_env")
            })?;
            Arc::new(TypesenseStore::new(TypesenseConfig {
                http,
                ..TypesenseConfig::new(url, api_key, r.collection.clone())
            })?)
        }
        "milvus" => {
            let url = r.milvus_url.clone().ok_or_else(|| missing("--milvus-url", "HOPWISE_MILVUS_URL"))?;
            let token = RemoteConfig::secret(&r.milvus_token, &r.milvus_token_env)?;
            Arc::new(MilvusStore::new(MilvusConfig { token, http, ..MilvusConfig::new(url, r.collection.clone()) })?)
        }
        "opensearch" => {
            let url = r.opensearch_url.clone().ok_or_else(|| missing("--opensearch-url", "HOPWISE_OPENSEARCH_URL"))?;
            let authorization = RemoteConfig::secret(&r.opensearch_auth, &r.opensearch_auth_env)?;
            Arc::new(OpenSearchStore::new(OpenSearchConfig {
                url,
                authorization,
                index: r.collection.clone(),
                http,
                flavor: None,
            })?)
        }
        other => bail!("unknown remote engine `{other}`; choose typesense, milvus or opensearch"),
    })
}
