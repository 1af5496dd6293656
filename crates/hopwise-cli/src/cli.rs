//! Command-line definitions. Every flag that has a config-file equivalent also reads an
//! environment variable; precedence is flag > environment > hopwise.toml > built-in default.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use hopwise_eval::compare::{GroupBy, Metric};

#[derive(Debug, Parser)]
#[command(
    name = "hopwise",
    version,
    about = "Answer multi-hop questions by planning a graph of sub-questions and retrieving only where the model does not know",
    long_about = "hopwise answers hard, multi-hop questions. It plans a graph of sub-questions (ToQD, HGOT), asks the \
model what it already knows, and retrieves evidence only where it does not. Every answer carries its graph, \
evidence and citations.\n\nWith no configuration it runs fully offline: the local Qwen2.5 model and the sample \
index, both prepared by `hopwise setup`.",
    after_help = "Examples:\n  hopwise setup\n  hopwise ask \"Which Canadian rock band released Counterparts and had a Hall of Fame drummer?\"\n  hopwise index ./my-docs --index ./my-index\n  hopwise ask \"...\" --index ./my-index --json\n  hopwise ask \"...\" --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-7B-Instruct"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Configuration file (default: ./hopwise.toml when present).
    #[arg(long, global = true, env = "HOPWISE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The top-level keys every command reads (`--home`, `--llm`, `--index`, `--retriever`).
    #[command(flatten)]
    pub general: hopwise_config::GeneralOverrides,
    /// The flags that edit the selected model backend.
    #[command(flatten)]
    pub model: hopwise_config::ModelOverrides,
    /// Where the remote engines are (`[remote]`), declared with the section.
    #[command(flatten)]
    pub remote: hopwise_config::RemoteOverrides,
    /// More log output (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Answer a question and show the reasoning graph.
    Ask(AskArgs),
    /// Build or update a BM25 index from JSONL, .txt and .md files or folders.
    Index(IndexArgs),
    /// Fetch and verify the local models and build the sample index (idempotent, resumable).
    Setup(SetupArgs),
    /// Evaluate strategies on datasets (resumable; writes results.jsonl, summary.md, plots).
    Eval(EvalArgs),
    /// Serve the HTTP API, the OpenAI-compatible endpoint and the live graph page.
    Serve(ServeArgs),
    /// Score query-rewriting methods by retrieval quality (Hits/MAP/MRR@K against gold evidence ids).
    RetrievalEval(RetrievalEvalArgs),
    /// Score retrieval gates (NO!, sampled uncertainty) against an oracle: was the closed-book answer right?
    GateEval(GateEvalArgs),
    /// List the available strategies, or show one with its options and their defaults.
    Strategies(StrategiesArgs),
    /// List prompt templates, or print one.
    Prompts(PromptsArgs),
    /// Print the effective configuration (file + environment + flags).
    Config,
    /// Regenerate the results section of EVALUATION.md from results/ (tables, paired comparisons, plots).
    Report(ReportArgs),
    /// Compare runs question by question with a base run: paired difference with its 95 % interval,
    /// won / tied / lost, and what each spent, overall and per question type or gate decision.
    Compare(CompareArgs),
    /// Named datasets: fetch the official releases (pinned sha256) into the data directory, list them.
    #[command(subcommand)]
    Data(DataCommand),
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The results folder: <model>/<dataset>/<row>/results.jsonl with run.json.
    #[arg(default_value = "results")]
    pub results: PathBuf,
    /// The document whose section between `<!-- results:begin -->` and `<!-- results:end -->` is
    /// rewritten (appended, with the markers, when it has none).
    #[arg(long, default_value = "EVALUATION.md")]
    pub out: PathBuf,
    /// The planned rows (default: RESULTS/plan.tsv).
    #[arg(long)]
    pub plan: Option<PathBuf>,
    /// Where the cost-accuracy plots go, linked relatively from the document (default: docs/results
    /// next to it).
    #[arg(long)]
    pub plots: Option<PathBuf>,
    /// Print a JSON summary.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    hopwise compare results/qwen2.5-1.5b/2wikimultihopqa/rtr results/qwen2.5-1.5b/2wikimultihopqa/toqd --by qtype\n  \
    hopwise compare out/results.jsonl out/results.jsonl --base-strategy rtr --other-strategy self-ask\n  \
    hopwise compare results/qwen2.5-1.5b/2wikimultihopqa/toqd results/qwen2.5-1.5b/2wikimultihopqa/toqd-no-*   # ablations\n  \
    hopwise compare <(git show HEAD~1:results.jsonl) results.jsonl   # a re-run against the run before")]
pub struct CompareArgs {
    /// The baseline: a results.jsonl, or a run directory holding one.
    pub base: PathBuf,
    /// The runs compared with it, each on its own (differences are OTHER - BASE).
    #[arg(required = true)]
    pub others: Vec<PathBuf>,
    /// The baseline's strategy, when its file holds several.
    #[arg(long)]
    pub base_strategy: Option<String>,
    /// The other runs' strategy, when their files hold several.
    #[arg(long)]
    pub other_strategy: Option<String>,
    /// The score compared: em (the headline), cover-em, f1, or accuracy (cover-EM for QA, label
    /// accuracy for fact checking).
    #[arg(long, default_value = "em")]
    pub metric: Metric,
    /// Also split the questions: `qtype` (the dataset's question type) or `searched` (whether OTHER
    /// retrieved for the question, i.e. what its gate kept closed-book).
    #[arg(long)]
    pub by: Option<GroupBy>,
    /// Print the comparisons as JSON (an array, one per OTHER).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Download, verify (sha256, size) and convert datasets: hotpotqa, 2wiki, musique, multihop-rag,
    /// strategyqa, bamboogle. Afterwards `--dataset NAME` finds them.
    Fetch(DataFetchArgs),
    /// List the known datasets and what is cached.
    List(DataListArgs),
    /// Write an HGOT demonstration pool (JSONL, for `--opt demonstrations=FILE`) from a dataset's
    /// solved examples after the evaluated ones: each gold supporting paragraph gives its sentence
    /// closest to the question, the answer and the other hops' titles as a cited passage.
    Demos(DataDemosArgs),
}

#[derive(Debug, Args)]
pub struct DataDemosArgs {
    /// Dataset file or name (as for `eval --dataset`).
    #[arg(long)]
    pub dataset: PathBuf,
    /// Examples skipped first: the ones you evaluate (`eval --limit N` runs the first N).
    #[arg(long, default_value_t = 50)]
    pub skip: usize,
    /// Most examples read after the skipped ones.
    #[arg(long, default_value_t = 1000)]
    pub limit: usize,
    /// Where the pool is written (replaced if it exists).
    #[arg(long)]
    pub out: PathBuf,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DataFetchArgs {
    /// Dataset names (see `hopwise data list`).
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Fetch and convert again even when cached.
    #[arg(long)]
    pub force: bool,
    /// Accept files that have no published checksum (their sha256 is recorded, not checked).
    #[arg(long)]
    pub allow_unpinned: bool,
    /// Keep the downloaded release files (in <data dir>/<name>/downloads).
    #[arg(long)]
    pub keep_downloads: bool,
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DataListArgs {
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RegistryArg {
    /// A dataset registry file to use instead of the built-in one (a mirror with its own URLs and
    /// checksums), in the built-in registry's TOML format.
    #[arg(long, env = "HOPWISE_DATA_REGISTRY")]
    pub registry: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question.
    pub question: String,
    #[command(flatten)]
    pub run: RunFlags,
    /// Strategy option, KEY=VALUE (repeatable), e.g. --opt critique=false.
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    pub opts: Vec<String>,
    /// Query-side retrieval options, declared with the top-level keys.
    #[command(flatten)]
    pub retrieval: hopwise_config::RetrievalOverrides,
    /// Print the trace as JSON on stdout and nothing else.
    #[arg(long, conflicts_with = "graph")]
    pub json: bool,
    /// Print the executed graph for a drawing tool instead of the text view: nodes with their
    /// answers and sources, and the edges (render with Mermaid or Graphviz, offline).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub graph: Option<GraphArg>,
}

/// `--graph` formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphArg {
    Mermaid,
    Dot,
}

/// How a question is answered, shared by `ask` and `serve` (for `serve`, the defaults of every request).
#[derive(Debug, Args)]
pub struct RunFlags {
    /// The strategy and passages per round, declared with the top-level keys.
    #[command(flatten)]
    pub run: hopwise_config::RunOverrides,
    /// Do not retrieve (runs the strategy's retrieval-free mode, e.g. toqd-noir).
    #[arg(long)]
    pub no_retrieval: bool,
    /// What a question may spend, declared with `[budget]`.
    #[command(flatten)]
    pub budget: hopwise_config::BudgetOverrides,
}

impl RunFlags {
    /// The configuration these flags override.
    pub fn overrides(&self) -> hopwise_config::Overrides {
        hopwise_config::Overrides { run: self.run.clone(), budget: self.budget.clone(), ..Default::default() }
    }
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Files or folders: .jsonl ({"id","title","text"} per line), .txt, .md.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Passage size in tokens for long documents.
    #[arg(long, default_value_t = 256)]
    pub chunk_tokens: usize,
    /// Tokens shared by consecutive passages.
    #[arg(long, default_value_t = 32)]
    pub overlap: usize,
    /// Also build or update the dense index (all-MiniLM-L6-v2) in INDEX/dense; only new or changed
    /// passages are embedded.
    #[arg(long)]
    pub dense: bool,
    /// Up to this many passages the dense index is searched exactly; above, through an HNSW graph
    /// when hopwise is built with hopwise-index's `hnsw` feature (without it, always exactly).
    #[arg(long, default_value_t = 20_000)]
    pub exact_threshold: usize,
    /// Where the passages go: the local index directory, or a remote engine (embedded with
    /// all-MiniLM-L6-v2, streamed in batches; a re-run resumes, skipping unchanged passages).
    #[arg(long, default_value = "local", value_name = "local|typesense|milvus|opensearch")]
    pub backend: String,
    /// Passages per embedding call and write request for a remote backend.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Models to fetch (repeatable): an LLM name, or all-minilm-l6-v2 (the embedder for dense retrieval).
    /// Default: the configured local model.
    #[arg(long = "fetch")]
    pub models: Vec<String>,
    /// Skip building the sample index.
    #[arg(long)]
    pub no_index: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StrategiesArgs {
    /// A strategy to show with every option it takes and its default.
    pub name: Option<String>,
    /// Machine-readable output (with the options of each strategy).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PromptsArgs {
    /// A template name to print.
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Dataset files (normalised JSONL or the original formats) or names (hotpotqa, 2wiki, musique, …:
    /// `$HOPWISE_DATA/NAME.jsonl`, else the copy `hopwise data fetch NAME` made), repeatable.
    #[arg(long, required = true)]
    pub dataset: Vec<PathBuf>,
    /// Comma-separated strategies, e.g. direct,cot,rtr,self-ask,toqd-noir,toqd.
    #[arg(short, long)]
    pub strategy: String,
    /// Output directory; an existing one from the same configuration is resumed.
    #[arg(long)]
    pub out: PathBuf,
    /// Questions of each dataset passed over first (file order): `--skip 50 --limit 100` runs
    /// questions 51 to 150 (EVALUATION.md's test range).
    #[arg(long, default_value_t = 0)]
    pub skip: usize,
    /// Questions per dataset (after the skipped ones).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Questions answered at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Retrieve from each example's own paragraphs (the distractor setting) instead of an index.
    #[arg(long)]
    pub context: bool,
    /// Do not use the on-disk cache of model calls.
    #[arg(long)]
    pub no_cache: bool,
    /// A strategy option for every strategy of the run, `KEY=VALUE` (repeatable), e.g.
    /// `--opt critique=false`; overrides `[strategies.NAME]`.
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    pub opts: Vec<String>,
    /// Start no new question after this much wall time (`90s`, `45m`, `2h`, `1h30m`); questions in
    /// flight finish and are written, and the next run resumes from there.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub time_budget: Option<std::time::Duration>,
    /// Query-side retrieval options, declared with the top-level keys.
    #[command(flatten)]
    pub retrieval: hopwise_config::RetrievalOverrides,
    /// Print a JSON summary of the run.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where the server listens and the limits it keeps (`[serve]`), declared with the section.
    #[command(flatten)]
    pub serve: hopwise_config::ServeOverrides,
    /// Strategy, index and budgets: the defaults for requests, which may pick another strategy and lower `k`
    /// or `r_max` but not raise them.
    #[command(flatten)]
    pub run: RunFlags,
}

#[derive(Debug, Args)]
pub struct GateEvalArgs {
    /// Datasets, a file (normalised JSONL) or a name (e.g. hotpotqa); items are their gold
    /// single-hop steps (2Wiki evidence triples, MuSiQue decompositions) or else the questions
    /// themselves. Repeatable.
    #[arg(long, required_unless_present = "records")]
    pub dataset: Vec<PathBuf>,
    /// Recompute the report from an earlier run's gate.jsonl instead of asking the model (with
    /// `--reader`, the sweep too).
    #[arg(long, conflicts_with = "dataset")]
    pub records: Option<PathBuf>,
    /// Examples per dataset (each may give several steps).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Closed-book samples per item (one request).
    #[arg(long, default_value_t = 5)]
    pub samples: u32,
    /// Sampling temperature.
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f32,
    /// Items asked at once.
    #[arg(long, default_value_t = 2)]
    pub concurrency: usize,
    /// `auto`: gold single-hop steps where the dataset has them, else the questions; `questions`:
    /// the questions themselves (a gate in front of the whole question).
    #[arg(long, value_enum, default_value_t = GateItems::Auto)]
    pub items: GateItems,
    /// A results file of a run with retrieval on the same questions (e.g. a `results.jsonl` of
    /// `rtr`): its answers, joined by example id, are what a gate that retrieves answers with, for
    /// the end-to-end sweep of accuracy against retrieval rounds. Repeatable.
    #[arg(long)]
    pub reader: Vec<PathBuf>,
    /// Output directory: gate.jsonl (one record per item), gate.md (the tables) and, with
    /// `--reader`, gate-<dataset>.svg/.png (the sweep).
    #[arg(long)]
    pub out: PathBuf,
    /// Do not use the on-disk cache of model calls.
    #[arg(long)]
    pub no_cache: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GateItems {
    Auto,
    Questions,
}

#[derive(Debug, Args)]
pub struct RetrievalEvalArgs {
    /// Dataset with gold evidence ids, a file or a name (e.g. multihop_rag); examples without evidence
    /// are left out.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Comma-separated methods: native, hyde, sub-question, multi-query, toqd, toqd-no-critique.
    #[arg(long, default_value = "native")]
    pub method: String,
    /// K of Hits/MAP/MRR@K and of each query's retrieval.
    #[arg(short, long, default_value_t = 10)]
    pub k: usize,
    /// Output directory for retrieval.jsonl and retrieval.md.
    #[arg(long)]
    pub out: PathBuf,
    /// Questions to evaluate (the first N of the file).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Questions evaluated at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Do not use the on-disk cache of model calls.
    #[arg(long)]
    pub no_cache: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Parses `90`, `90s`, `45m`, `2h`, `1h30m` (whole numbers, units s/m/h; a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(std::time::Duration::from_secs(seconds));
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(format!("`{text}`: unknown unit `{c}` (use s, m or h, e.g. 90m or 1h30m)")),
        };
        let value: u64 = digits.parse().map_err(|_| format!("`{text}`: a number must come before `{c}`"))?;
        total = value.checked_mul(unit).and_then(|v| total.checked_add(v)).ok_or(format!("`{text}` is too long"))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(format!("`{text}`: the last number has no unit (s, m or h)"));
    }
    Ok(std::time::Duration::from_secs(total))
}

#[cfg(test)]
mod duration_tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_or_say_why_not() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("45m"), Ok(Duration::from_secs(2700)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(parse_duration("2d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("1h30").unwrap_err().contains("no unit"));
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }
}
