//! The one table of named strategies, above every strategy (their trait is in `api`).
//!
//! A strategy answers one question through a [`Ctx`]; [`run`] wraps it with input checks and closes
//! the trace. [`STRATEGIES`] lists every strategy once: its name, what it needs (a retriever, an
//! embedder, an NLI judge), the templates it may render, its retrieval-free variant and how to build
//! it. The CLI, the server, the evaluator and the runtime read strategies from it and nowhere else.

use hopwise_core::Trace;

use crate::ctx::Ctx;
use crate::error::{ReasonError, Result};

pub mod api;

pub use api::{Answer, Strategy, StrategyOptions};

/// One row of [`STRATEGIES`].
pub struct StrategySpec {
    pub name: &'static str,
    pub description: &'static str,
    /// It cannot run without a retriever.
    pub needs_retriever: bool,
    /// It uses a sentence embedder when one is configured (HGOT's STOP test and demonstration choice).
    pub uses_embedder: bool,
    /// It judges entailment: with the configured NLI backend, else the LLM judge over its model.
    pub uses_nli: bool,
    /// The prompt templates it may render (besides `system`, which every call sends), so an evaluation
    /// can tell whether a changed template touches its results.
    pub templates: &'static [&'static str],
    /// The strategy to run instead when retrieval is turned off, for those that need a retriever.
    pub without_retrieval: Option<&'static str>,
    /// Options whose value names a file on the machine that runs the strategy. Only its own
    /// configuration may set them; the server refuses them in requests.
    pub path_options: &'static [&'static str],
    /// Its options as the config file writes them, each at its default.
    defaults: fn() -> serde_json::Value,
    build: fn(&StrategyOptions) -> Result<Box<dyn Strategy>>,
}

impl StrategySpec {
    /// Every option it takes, at its default (for this preset), as `[strategies.NAME]` writes it.
    pub fn default_options(&self) -> serde_json::Value {
        (self.defaults)()
    }

    /// Its catalogue entry, as `hopwise strategies --json`, `GET /v1/strategies` and Python's
    /// `hopwise.strategies()` give it: name, description, whether it needs a retriever, options.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "needs_retriever": self.needs_retriever,
            "options": self.default_options(),
        })
    }

    /// Builds the strategy with `options`, rejecting unknown keys and invalid values.
    pub fn build(&self, options: &StrategyOptions) -> Result<Box<dyn Strategy>> {
        (self.build)(options)
    }
}

const TOQD_FORMATS: [&str; 5] =
    ["toqd_format_short", "toqd_format_typed", "toqd_format_yes_no", "toqd_format_iso_date", "toqd_format_digits"];
const TOQD_TEMPLATES: &[&str] = &[
    "toqd_plan",
    TOQD_FORMATS[0],
    TOQD_FORMATS[1],
    TOQD_FORMATS[2],
    TOQD_FORMATS[3],
    TOQD_FORMATS[4],
    "toqd_self_verify",
    "toqd_recall",
    "toqd_self_verify_context",
    "toqd_aggregate",
    "toqd_summary",
    "toqd_summary_passages",
    crate::protocol::Hedges::TEMPLATE,
];
const TOQD_PAPER_TEMPLATES: &[&str] = &[
    "toqd_decompose",
    "toqd_critique",
    "toqd_construct",
    "toqd_rewrite",
    "toqd_self_verify",
    "toqd_self_verify_context",
    "toqd_decompose_leaf",
    "toqd_decompose_internal",
    "toqd_aggregate",
    "toqd_best_effort",
    "toqd_summary",
    "toqd_format_short",
    crate::protocol::Hedges::TEMPLATE,
];
const SELF_ASK_TEMPLATES: &[&str] =
    &["self_ask_first", "self_ask", "self_ask_read", "self_ask_known", "self_ask_final"];
const PLAN_SOLVE_TEMPLATES: &[&str] = &["plan_solve", "plan_solve_rtr"];
const IRCOT_TEMPLATES: &[&str] = &["ircot_step", "ircot_read", "rtr"];
const SEARCH_AGENT_TEMPLATES: &[&str] = &["search_agent", "search_agent_final"];

/// A row with no embedder, no NLI and no retrieval-free variant; the rows below change what differs.
const fn row(
    name: &'static str,
    description: &'static str,
    needs_retriever: bool,
    templates: &'static [&'static str],
    defaults: fn() -> serde_json::Value,
    build: fn(&StrategyOptions) -> Result<Box<dyn Strategy>>,
) -> StrategySpec {
    StrategySpec {
        name,
        description,
        needs_retriever,
        uses_embedder: false,
        uses_nli: false,
        templates,
        without_retrieval: None,
        path_options: &[],
        defaults,
        build,
    }
}

/// The options `T` takes when none is given.
fn defaults<T: Default + serde::Serialize>() -> serde_json::Value {
    as_written(serde_json::to_value(T::default()).unwrap_or_default())
}

/// `hgot-paper`'s options: `hgot`'s, with the paper's flow where none is given.
fn hgot_paper_defaults() -> serde_json::Value {
    as_written(
        serde_json::to_value(crate::hgot::HgotOptions::default().paper(&serde_json::Map::new())).unwrap_or_default(),
    )
}

/// `value` with each number that an `f32` option widened (0.7 → 0.699999988…) written as a user
/// would write it; it reads back to the same `f32`.
fn as_written(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(wide) if !n.is_i64() && !n.is_u64() && f64::from(wide as f32) == wide => {
                let short: f64 = (wide as f32).to_string().parse().unwrap_or(wide);
                serde_json::Number::from_f64(short).map_or(Value::Number(n), Value::Number)
            }
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(as_written).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, as_written(v))).collect()),
        other => other,
    }
}

/// Every strategy, once.
pub const STRATEGIES: &[StrategySpec] = &[
    StrategySpec {
        without_retrieval: Some("toqd-noir"),
        ..row("toqd", "ToQD: one search with the question; a typed plan (steps, their answer types and dependencies, and how their answers combine); the question read first, then each node over the passages, searching on its own only when unsure; comparisons and yes/no combinations decided in code; sampled summaries voted", true, TOQD_TEMPLATES, defaults::<crate::toqd::ToqdOptions>, |o| {
            Ok(Box::new(crate::toqd::Toqd::new(o.parse("toqd")?, true)?))
        })
    },
    row("toqd-noir", "ToQD without retrieval: the typed plan, nodes answered closed-book by sampled votes", false, TOQD_TEMPLATES, defaults::<crate::toqd::ToqdOptions>, |o| {
        Ok(Box::new(crate::toqd::Toqd::new(o.parse("toqd-noir")?, false)?))
    }),
    StrategySpec {
        without_retrieval: Some("toqd-noir-paper"),
        ..row("toqd-paper", "ToQD as the paper runs it: decompose, critique, construct a topology graph; each node NO! → retrieve → NO! → decompose into a child graph; summary", true, TOQD_PAPER_TEMPLATES, defaults::<crate::toqd::PaperOptions>, |o| {
            Ok(Box::new(crate::toqd::ToqdPaper::new(o.parse("toqd-paper")?, true)?))
        })
    },
    row("toqd-noir-paper", "ToQD as the paper runs it without retrieval: a node that says NO! is decomposed", false, TOQD_PAPER_TEMPLATES, defaults::<crate::toqd::PaperOptions>, |o| {
        Ok(Box::new(crate::toqd::ToqdPaper::new(o.parse("toqd-noir-paper")?, false)?))
    }),
    StrategySpec {
        uses_nli: true,
        ..row("uar", "Uncertainty-gated retrieval: sentence by sentence, retrieve with a sub-query when sampled next sentences disagree (U > θ)", true, crate::uar::SENTENCE_LOOP_NLI_TEMPLATES, defaults::<crate::uar::UarOptions>, |o| {
            Ok(Box::new(crate::uar::DynamicRetrieval::uar(&o.parse("uar")?)?))
        })
    },
    row("always-retrieve", "Sentence loop that retrieves before every sentence, with the temporary sentence as the query", true, crate::uar::SENTENCE_LOOP_TEMPLATES, defaults::<crate::uar::AlwaysRetrieveOptions>, |o| {
        Ok(Box::new(crate::uar::DynamicRetrieval::always_retrieve("always-retrieve", &o.parse("always-retrieve")?)?))
    }),
    row("always-retrieve-subquery", "Sentence loop that retrieves before every sentence, with a generated sub-query", true, crate::uar::SENTENCE_LOOP_TEMPLATES, defaults::<crate::uar::AlwaysRetrieveOptions>, |o| {
        Ok(Box::new(crate::uar::DynamicRetrieval::always_retrieve(
            "always-retrieve-subquery",
            &o.parse("always-retrieve-subquery")?,
        )?))
    }),
    row("flare-instruct", "Sentence loop in which the model asks for a search itself with [Search(query)]", true, crate::uar::SENTENCE_LOOP_TEMPLATES, defaults::<crate::uar::FlareInstructOptions>, |o| {
        Ok(Box::new(crate::uar::DynamicRetrieval::flare_instruct(&o.parse("flare-instruct")?)?))
    }),
    row("flare-direct", "FLARE (Jiang et al. 2023): search with the question, then a look-ahead sentence at a time; one with a token below probability θ is searched for, its unlikely tokens masked, and regenerated", true, crate::uar::SENTENCE_LOOP_TEMPLATES, defaults::<crate::uar::FlareDirectOptions>, |o| {
        Ok(Box::new(crate::uar::DynamicRetrieval::flare_direct(&o.parse("flare-direct")?)?))
    }),
    StrategySpec {
        uses_embedder: true,
        uses_nli: true,
        path_options: &["demonstrations"],
        ..row("hgot", "HGOT: probe the question (cited thoughts, citation-weighted vote); a confident probe answers; otherwise recursive plans of dependent search steps, and the graph's answer replaces the probe's only when more confident", true, crate::hgot::TEMPLATES, defaults::<crate::hgot::HgotOptions>, |o| {
            Ok(Box::new(crate::hgot::Hgot::new(o.parse("hgot")?)?))
        })
    },
    StrategySpec {
        uses_embedder: true,
        uses_nli: true,
        path_options: &["demonstrations"],
        ..row("hgot-paper", "HGOT as the paper runs it: recursive plan/search/infer over a hierarchical dependency graph until depth or graph size stops it; thoughts weighed by citation quality, passages by σ", true, crate::hgot::TEMPLATES, hgot_paper_defaults, |o| {
            let opts: crate::hgot::HgotOptions = o.parse("hgot-paper")?;
            Ok(Box::new(crate::hgot::Hgot::named("hgot-paper", opts.paper(&o.0))?))
        })
    },
    row("direct", "Direct prompting: one call, answer from the model's own knowledge", false, &["direct"], defaults::<crate::baselines::direct::DirectOptions>, |o| {
        Ok(Box::new(crate::baselines::direct::Direct::new(o.parse("direct")?)))
    }),
    row("cot", "Chain-of-thought: reason step by step, then answer", false, &["cot"], defaults::<crate::baselines::cot::CotOptions>, |o| {
        Ok(Box::new(crate::baselines::cot::Cot::new(o.parse("cot")?)))
    }),
    row("cot-sc", "CoT with self-consistency: n reasoning samples in one request, majority vote (option samples=5)", false, &["cot"], defaults::<crate::baselines::cot::CotScOptions>, |o| {
        Ok(Box::new(crate::baselines::cot::CotSc::new(o.parse("cot-sc")?)?))
    }),
    row("rtr", "Direct Retrieval / Retrieve-then-Read: retrieve top-k for the question, answer from the passages", true, &["rtr"], defaults::<crate::baselines::rtr::RtrOptions>, |o| {
        Ok(Box::new(crate::baselines::rtr::Rtr::new(o.parse("rtr")?)))
    }),
    StrategySpec {
        without_retrieval: Some("self-ask-noir"),
        ..row("self-ask", "Self-Ask with retrieval: follow-up questions, each answered from retrieved passages", true, SELF_ASK_TEMPLATES, defaults::<crate::baselines::self_ask::SelfAskOptions>, |o| {
            Ok(Box::new(crate::baselines::self_ask::SelfAsk::new(o.parse("self-ask")?, true)))
        })
    },
    row("self-ask-noir", "Self-Ask without retrieval: follow-up questions answered from the model's knowledge", false, SELF_ASK_TEMPLATES, defaults::<crate::baselines::self_ask::SelfAskOptions>, |o| {
        Ok(Box::new(crate::baselines::self_ask::SelfAsk::new(o.parse("self-ask-noir")?, false)))
    }),
    row("least-to-most", "Least-to-Most: reduce to simpler questions, solve them in order, then answer", false, &["ltm_reduce", "ltm_solve", "ltm_final"], defaults::<crate::baselines::least_to_most::LeastToMostOptions>, |o| {
        Ok(Box::new(crate::baselines::least_to_most::LeastToMost::new(o.parse("least-to-most")?)))
    }),
    row("plan-solve", "Plan-and-Solve: devise a plan, carry it out step by step, answer", false, PLAN_SOLVE_TEMPLATES, defaults::<crate::baselines::plan_solve::PlanSolveOptions>, |o| {
        Ok(Box::new(crate::baselines::plan_solve::PlanSolve::new(o.parse("plan-solve")?, false)))
    }),
    row("plan-solve-rtr", "Plan-and-Solve over passages retrieved for the question", true, PLAN_SOLVE_TEMPLATES, defaults::<crate::baselines::plan_solve::PlanSolveOptions>, |o| {
        Ok(Box::new(crate::baselines::plan_solve::PlanSolve::new(o.parse("plan-solve-rtr")?, true)))
    }),
    row("ircot", "IRCoT (Trivedi et al. 2023): one chain-of-thought sentence at a time, each the next search query, until it states the answer; then read the collected passages", true, IRCOT_TEMPLATES, defaults::<crate::peers::ircot::IrcotOptions>, |o| {
        Ok(Box::new(crate::peers::ircot::Ircot::new(o.parse("ircot")?)?))
    }),
    row("iter-retgen", "Iter-RetGen (Shao et al. 2023): rounds of retrieve with the question and the previous round's generation, then generate a reasoned answer", true, &["iter_retgen"], defaults::<crate::peers::iter_retgen::IterRetGenOptions>, |o| {
        Ok(Box::new(crate::peers::iter_retgen::IterRetGen::new(o.parse("iter-retgen")?)?))
    }),
    row("search-agent", "Search agent (ReAct / Search-R1 prompting): the model writes <search>query</search> until it writes <answer>…</answer>; tags grammar-constrained", true, SEARCH_AGENT_TEMPLATES, defaults::<crate::peers::search_agent::SearchAgentOptions>, |o| {
        Ok(Box::new(crate::peers::search_agent::SearchAgent::new(o.parse("search-agent")?)?))
    }),
];

/// The table row of `name`.
pub fn spec(name: &str) -> Result<&'static StrategySpec> {
    STRATEGIES.iter().find(|s| s.name == name).ok_or_else(|| ReasonError::UnknownStrategy(name.to_string()))
}

/// The strategy to run for `name`, honouring a request for no retrieval through the retrieval-free
/// variant. Shared by the CLI and the server so both accept exactly the same names.
pub fn resolve(name: &str, no_retrieval: bool) -> Result<String> {
    let row = spec(name)?;
    if !no_retrieval || !row.needs_retriever {
        // Strategies that never retrieve (direct, cot, …) already are their retrieval-free mode.
        return Ok(name.to_string());
    }
    row.without_retrieval
        .map(str::to_string)
        .ok_or_else(|| ReasonError::InvalidOption(format!("strategy `{name}` has no retrieval-free mode")))
}

/// The prompt templates `strategy` may render: its own narrower list, else its table row's.
pub fn templates(strategy: &dyn Strategy) -> Vec<&'static str> {
    strategy.templates().unwrap_or_else(|| spec(strategy.name()).map_or(Vec::new(), |row| row.templates.to_vec()))
}

/// Builds a strategy by name.
pub fn build(name: &str, options: &StrategyOptions) -> Result<Box<dyn Strategy>> {
    spec(name)?.build(options)
}

/// Answers `question` with `strategy` and returns the closed trace. Backend failures inside the
/// strategy degrade to a best-effort answer; only bad input and configuration errors are `Err`.
pub async fn run(strategy: &dyn Strategy, ctx: &Ctx, question: &str) -> Result<Trace> {
    let question = question.trim();
    if question.is_empty() {
        return Err(ReasonError::EmptyQuestion);
    }
    if spec(strategy.name()).is_ok_and(|row| row.needs_retriever) && !ctx.has_retriever() {
        return Err(ReasonError::NeedsRetriever(strategy.name().to_string()));
    }
    match strategy.answer(ctx, question).await {
        Ok(answer) => Ok(ctx.rec().finish(&answer.text, answer.rationale)),
        Err(e) if e.is_fatal() => Err(e),
        Err(e) => {
            ctx.rec().best_effort(format!("the strategy stopped early: {e}"));
            Ok(ctx.rec().finish("", None))
        }
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    /// What `hopwise strategies NAME` lists is what the strategy takes: every listed option, given
    /// back at its listed value, builds it (so no listed key is unknown and no value invalid).
    #[test]
    fn every_listed_default_option_is_accepted_as_written() {
        for row in STRATEGIES {
            let defaults = row.default_options();
            let options = defaults.as_object().unwrap_or_else(|| panic!("{}: options are an object", row.name));
            build(row.name, &StrategyOptions(options.clone())).unwrap_or_else(|e| panic!("{}: {e}", row.name));
        }
        let toqd = spec("toqd").expect("toqd").default_options();
        assert_eq!(toqd["samples"], serde_json::json!(5));
        assert_eq!(toqd["hedges"], serde_json::json!(true));
        assert_eq!(spec("toqd-paper").expect("toqd-paper").default_options()["hedges"], serde_json::json!(false));
        let paper = spec("hgot-paper").expect("hgot-paper").default_options();
        assert_eq!(paper["stop_confidence"], serde_json::Value::Null, "the paper's flow has no confidence stop");
        assert!(spec("hgot").expect("hgot").default_options()["stop_confidence"].is_number());
        assert_eq!(paper["temperature"], serde_json::json!(0.7), "an f32 default reads as written");
        assert_eq!(paper["alpha"], serde_json::json!(0.2));
    }

    #[test]
    fn every_catalog_entry_builds_with_default_options_and_names_itself() {
        for StrategySpec { name, .. } in STRATEGIES {
            let s = build(name, &StrategyOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(s.name(), *name);
        }
        assert!(matches!(build("nope", &StrategyOptions::default()), Err(ReasonError::UnknownStrategy(_))));
        let mut bad = StrategyOptions::default();
        bad.set("no_such_key", serde_json::json!(1));
        assert!(matches!(build("cot", &bad), Err(ReasonError::InvalidOption(_))));
        assert_eq!(resolve("toqd", true).ok().as_deref(), Some("toqd-noir"));
        assert_eq!(resolve("toqd-noir", true).ok().as_deref(), Some("toqd-noir"));
        assert_eq!(resolve("cot", false).ok().as_deref(), Some("cot"));
        assert_eq!(resolve("direct", true).ok().as_deref(), Some("direct"), "never retrieves anyway");
        assert!(matches!(resolve("rtr", true), Err(ReasonError::InvalidOption(_))));
        assert!(matches!(resolve("nope", false), Err(ReasonError::UnknownStrategy(_))));
    }

    /// The option names a strategy accepts, read from the error its options give for an unknown key
    /// (serde lists the expected fields).
    fn option_keys(spec: &StrategySpec) -> Vec<String> {
        let mut probe = StrategyOptions::default();
        probe.set("no_such_option_here", serde_json::json!(1));
        let Err(ReasonError::InvalidOption(message)) = spec.build(&probe) else {
            panic!("{}: an unknown option was accepted", spec.name)
        };
        let Some((_, expected)) = message.split_once("expected") else { return Vec::new() };
        expected.split('`').skip(1).step_by(2).map(str::to_string).collect()
    }

    /// Every option that takes free text must be declared a path option (and so refused over HTTP),
    /// so a new path-typed option cannot reach the server's requests unnoticed.
    #[test]
    fn every_free_text_option_is_declared() {
        for spec in STRATEGIES {
            let keys = option_keys(spec);
            for key in &keys {
                let mut options = StrategyOptions::default();
                options.set(key, serde_json::json!("/nonexistent/hopwise-probe"));
                let typed_refusal = match spec.build(&options) {
                    Ok(_) => false,
                    Err(ReasonError::InvalidOption(m)) => {
                        ["invalid type", "unknown variant", "invalid value", "expected"].iter().any(|w| m.contains(w))
                    }
                    Err(_) => false,
                };
                let declared = spec.path_options.contains(&key.as_str());
                assert_eq!(
                    !typed_refusal, declared,
                    "{}: option `{key}` takes free text: declare it in path_options",
                    spec.name
                );
            }
            for declared in spec.path_options {
                assert!(keys.iter().any(|k| k == declared), "{}: `{declared}` is not an option", spec.name);
            }
        }
        assert!(option_keys(spec("hgot").expect("hgot")).iter().any(|k| k == "demonstrations"));
    }

    /// Each strategy, run on a few scripted replies that walk its main paths, renders only templates it
    /// declares (the evaluation fingerprint hashes exactly those).
    #[tokio::test]
    async fn strategies_render_only_the_templates_they_declare() {
        use std::sync::Arc;

        use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
        use hopwise_core::{Passage, Prompts, Recorder};

        let passages = vec![Passage {
            id: "p1".into(),
            title: "Jaws".into(),
            text: "Jaws was directed by Steven Spielberg.".into(),
            ..Default::default()
        }];
        let scripts = [
            ScriptedLlm::new(),
            ScriptedLlm::new().fallback("1. Who directed Jaws?\n2. When was he born?\n1 -> 2\n2 -> Q\nAnswer: Spielberg"),
            ScriptedLlm::new().fallback("Follow up: Who directed Jaws?\nSo the final answer is: Spielberg.\nStep 1: Who directed Jaws? [1]\nAnswer: Spielberg"),
            ScriptedLlm::new().fallback(r##"{"op":"answer","answer_type":"date","steps":[{"question":"Who directed Jaws?","answer_type":"person"},{"question":"When was #1 born?","answer_type":"date"}]}"##),
        ];
        let questions = ["Who directed Jaws?", "Where was the director of Jaws born?"];
        for StrategySpec { name, .. } in STRATEGIES {
            for (llm, question) in scripts.iter().flat_map(|llm| questions.iter().map(move |q| (llm, *q))) {
                let strategy = build(name, &StrategyOptions::default()).expect("builds");
                let rec = Recorder::new(question, name);
                let ctx = Ctx::new(Arc::new(llm.clone()), Arc::new(Prompts::default()), rec)
                    .with_retriever(Some(Arc::new(StaticRetriever::new(passages.clone()))));
                let _ = run(strategy.as_ref(), &ctx, question).await;
                for template in ctx.rendered_templates() {
                    assert!(
                        templates(strategy.as_ref()).contains(&template.as_str())
                            || crate::ctx::SHARED_FRAGMENTS.contains(&template.as_str()),
                        "{name} rendered `{template}`, which it does not declare"
                    );
                }
            }
        }
    }
}
