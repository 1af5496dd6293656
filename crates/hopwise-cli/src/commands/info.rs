//! `hopwise strategies`, `hopwise prompts`, `hopwise config`.

use std::process::ExitCode;

use anyhow::{Context, Result};
use hopwise_config::Config;
use hopwise_reason::strategy::{StrategySpec, STRATEGIES};

pub fn strategies(name: Option<&str>, json: bool) -> Result<ExitCode> {
    if let Some(name) = name {
        let s = hopwise_reason::strategy::spec(name).map_err(|_| {
            let hint = hopwise_config::closest_strategy(name).map(|n| format!(" (did you mean `{n}`?)"));
            anyhow::anyhow!("no strategy `{name}`{}; `hopwise strategies` lists them", hint.unwrap_or_default())
        })?;
        if json {
            println!("{}", serde_json::to_string_pretty(&s.describe())?);
            return Ok(ExitCode::SUCCESS);
        }
        println!("{}\n\n{}\n", s.name, s.description);
        println!("Options ([strategies.{}] in hopwise.toml, or --opt KEY=VALUE), at their defaults:", s.name);
        match s.default_options().as_object() {
            Some(options) if !options.is_empty() => {
                let width = options.keys().map(String::len).max().unwrap_or(0);
                for (key, value) in options {
                    println!("  {key:<width$}  {value}");
                }
            }
            _ => println!("  (none)"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    if json {
        let list: Vec<_> = STRATEGIES.iter().map(StrategySpec::describe).collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        let width = STRATEGIES.iter().map(|s| s.name.len()).max().unwrap_or(0);
        for s in STRATEGIES {
            println!("{:<width$}  {}", s.name, s.description);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn prompts(config: &Config, name: Option<&str>) -> Result<ExitCode> {
    let prompts = config.prompts()?;
    match name {
        Some(n) => {
            let text =
                prompts.template(n).with_context(|| format!("no template `{n}`; `hopwise prompts` lists them"))?;
            println!("{text}");
        }
        None => prompts.names().for_each(|n| println!("{n}")),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn config(config: &Config) -> Result<ExitCode> {
    print!("{}", toml::to_string_pretty(&shareable(config))?);
    println!("# data directory: {}", config.home_dir().display());
    println!("# index: {}", config.index_dir().display());
    Ok(ExitCode::SUCCESS)
}

/// Written in place of a secret.
const REDACTED: &str = "<redacted>";

/// `config` as it may be printed: URLs without credentials, and secrets given directly (remote
/// engine keys, extra HTTP header values) replaced, so the output can be pasted into a bug report.
fn shareable(config: &Config) -> Config {
    let mut shown = config.clone();
    for llm in shown.llms.values_mut() {
        if let hopwise_config::LlmConfig::Openai(cfg) = llm {
            cfg.base_url = hopwise_models::redact_url(&cfg.base_url);
            cfg.headers.values_mut().for_each(|v| *v = REDACTED.into());
        }
    }
    let remote = &mut shown.remote;
    for url in [&mut remote.typesense_url, &mut remote.milvus_url, &mut remote.opensearch_url].into_iter().flatten() {
        *url = hopwise_models::redact_url(url);
    }
    for secret in
        [&mut remote.typesense_api_key, &mut remote.milvus_token, &mut remote.opensearch_auth].into_iter().flatten()
    {
        *secret = REDACTED.into();
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_config_holds_no_credentials() {
        let mut config = Config::from_toml(
            r#"
            llm = "srv"
            [llms.srv]
            kind = "openai"
            base_url = "https://alice:hunter2-password@llm.example/v1?key=sk-query-secret"
            model = "m"
            headers = { Authorization = "Bearer sk-header-secret" }
            [remote]
            typesense_url = "http://bob:tspassword@ts.example:8108"
            "#,
        )
        .expect("valid config");
        // Secrets given directly come from flags, never from the file.
        config.remote.typesense_api_key = Some("ts-direct-secret".into());
        let text = toml::to_string_pretty(&shareable(&config)).expect("serialises");
        for secret in
            ["hunter2-password", "alice", "sk-query-secret", "sk-header-secret", "tspassword", "ts-direct-secret"]
        {
            assert!(!text.contains(secret), "{secret} printed:\n{text}");
        }
        assert!(text.contains("llm.example") && text.contains("ts.example"), "{text}");
    }
}
