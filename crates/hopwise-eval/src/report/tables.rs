//! The report's tables, computed from the plan and the rows on disk: per model and dataset the
//! main table (rows named after their strategy), one ablation table per strategy that has
//! ablation rows (led by that strategy's main row), every row against `rtr`, and our methods against
//! the strongest peer.

use std::collections::BTreeSet;

use hopwise_core::Prompts;

use crate::config::{strategy_prompts_hash, RunFingerprint};
use crate::paired::{compare, PairedComparison, BASELINE};
use crate::report::plan::PlannedRow;
use crate::report::scan::{Range, RowResults, Session};
use crate::results::ResultRecord;
use crate::summary::{summarize, Cell};

/// One row of a table: what was planned and what finished.
#[derive(Debug, Clone)]
pub struct RowView<'a> {
    pub label: String,
    pub strategy: String,
    pub options: Vec<String>,
    /// Questions planned; `None` for a row found on disk but not in the plan.
    pub planned: Option<usize>,
    /// Means and intervals over the finished questions; `None` before the first one.
    pub cell: Option<Cell>,
    pub results: Option<&'a RowResults>,
    /// Why this checkout cannot resume the row: its `run.json` records prompts other than the ones
    /// the strategy renders now, so the row measures earlier prompts and a rerun starts it afresh.
    pub stale: Option<String>,
}

impl RowView<'_> {
    pub fn done(&self) -> usize {
        self.cell.as_ref().map_or(0, |c| c.n)
    }

    /// Whether the row has answered every question planned for it; a row not in the plan never is.
    pub fn is_complete(&self) -> bool {
        self.planned.is_some_and(|p| self.done() >= p)
    }

    pub fn sessions(&self) -> &[Session] {
        self.results.map_or(&[], |r| r.sessions.as_slice())
    }

    pub(crate) fn records(&self) -> Vec<&ResultRecord> {
        self.results.map_or_else(Vec::new, |r| r.records.iter().filter(|x| x.strategy == self.strategy).collect())
    }
}

#[derive(Debug, Clone)]
pub struct Table<'a> {
    /// `None` for the main table, else the strategy whose ablations these are.
    pub ablated: Option<String>,
    pub rows: Vec<RowView<'a>>,
}

#[derive(Debug, Clone)]
pub struct DatasetReport<'a> {
    pub dataset: String,
    pub main: Table<'a>,
    pub ablations: Vec<Table<'a>>,
    /// Every row with results against the `rtr` row, on their common questions.
    pub paired: Vec<PairedComparison>,
    /// Our methods' rows against the strongest peer, when a peer row is complete.
    pub against_peer: Option<PeerComparison>,
}

/// The training-free multi-hop methods a reader compares us with (their papers' presets).
pub const PEERS: [&str; 4] = ["ircot", "iter-retgen", "search-agent", "flare-direct"];
/// The rows of the three methods this project implements, compared with the strongest peer.
pub const OURS: [&str; 5] = ["toqd", "toqd-paper", "uar", "hgot", "hgot-paper"];

/// Our rows against the peer row with the highest EM among the complete ones of the same table
/// (cover-EM, then F1, breaks a tie).
#[derive(Debug, Clone)]
pub struct PeerComparison {
    pub peer: String,
    /// The complete peer rows it was chosen from, with their EM.
    pub candidates: Vec<(String, f64)>,
    pub paired: Vec<PairedComparison>,
}

#[derive(Debug, Clone)]
pub struct ModelReport<'a> {
    pub model: String,
    pub range: Range,
    pub datasets: Vec<DatasetReport<'a>>,
}

fn view<'a>(planned: Option<&PlannedRow>, found: Option<&'a RowResults>, label: &str) -> RowView<'a> {
    let strategy = planned
        .map(|p| p.strategy.clone())
        .or_else(|| found.and_then(|f| f.records.first()).map(|r| r.strategy.clone()))
        .unwrap_or_default();
    let cell = found.and_then(|f| {
        let summary = summarize(&f.records);
        summary.cells.into_iter().find(|c| c.strategy == strategy)
    });
    RowView {
        label: label.to_string(),
        options: planned.map(|p| p.options.clone()).unwrap_or_default(),
        planned: planned.map(|p| p.questions),
        stale: found.and_then(|f| f.run.as_ref()).and_then(|run| stale_prompts(run, &strategy)),
        strategy,
        cell,
        results: found,
    }
}

/// The prompt change that keeps this checkout from resuming a row, judged from its `run.json`: the
/// hash of `strategy`'s default templates (with the row's recorded options) against the recorded one.
/// Only prompts are checked: the model and the index need their files, which a report does not load.
fn stale_prompts(run: &RunFingerprint, strategy: &str) -> Option<String> {
    let recorded = run.strategy_prompts.get(strategy)?;
    let options = run.strategy_options.get(strategy).cloned().unwrap_or_default();
    match strategy_prompts_hash(&Prompts::default(), strategy, &options) {
        Ok(now) if now == *recorded => None,
        Ok(now) => Some(format!("`{strategy}` prompts {recorded}, now {now}")),
        Err(e) => Some(format!("`{strategy}` with the recorded options cannot be built now: {e}")),
    }
}

fn dataset_report<'a>(dataset: &str, plan: &[PlannedRow], found: &[&'a RowResults]) -> DatasetReport<'a> {
    let planned: Vec<&PlannedRow> = plan.iter().filter(|p| p.dataset == dataset).collect();
    let mut rows: Vec<RowView<'a>> =
        planned.iter().map(|p| view(Some(p), found.iter().copied().find(|f| f.label == p.label), &p.label)).collect();
    // Rows on disk that the plan does not list come last, by label.
    for f in found.iter().filter(|f| !planned.iter().any(|p| p.label == f.label)) {
        rows.push(view(None, Some(f), &f.label));
    }
    let is_main = |r: &RowView| r.label == r.strategy;
    let main = Table { ablated: None, rows: rows.iter().filter(|r| is_main(r)).cloned().collect() };
    let mut ablated: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| !is_main(r)) {
        if !ablated.contains(&r.strategy) {
            ablated.push(r.strategy.clone());
        }
    }
    let ablations = ablated
        .into_iter()
        .map(|strategy| Table {
            rows: rows.iter().filter(|r| r.strategy == strategy).cloned().collect(),
            ablated: Some(strategy),
        })
        .collect();
    DatasetReport {
        dataset: dataset.to_string(),
        paired: paired_with_rtr(dataset, &rows),
        against_peer: against_strongest_peer(dataset, &main.rows),
        main,
        ablations,
    }
}

/// The strongest complete peer row by EM, a tie broken by cover-EM and then F1 (the table's other
/// answer columns; the earlier in plan order when all three tie), and each of our rows with results
/// against it on their common questions.
fn against_strongest_peer(dataset: &str, rows: &[RowView]) -> Option<PeerComparison> {
    let candidates: Vec<(&RowView, [f64; 3])> = rows
        .iter()
        .filter(|r| PEERS.contains(&r.label.as_str()))
        .filter(|r| r.is_complete())
        .filter_map(|r| r.cell.as_ref().map(|c| (r, [c.em, c.cover_em, c.f1])))
        .collect();
    let (peer, _) = candidates.iter().fold(None, |best: Option<(&RowView, [f64; 3])>, &(r, scores)| match best {
        Some((_, top)) if top >= scores => best,
        _ => Some((r, scores)),
    })?;
    let peer_records = peer.records();
    let paired: Vec<PairedComparison> = rows
        .iter()
        .filter(|r| OURS.contains(&r.label.as_str()) && r.done() > 0)
        .filter_map(|r| compare(dataset, &peer.label, &peer_records, &r.label, &r.records()))
        .collect();
    Some(PeerComparison {
        peer: peer.label.clone(),
        candidates: candidates.iter().map(|(r, scores)| (r.label.clone(), scores[0])).collect(),
        paired,
    })
}

fn paired_with_rtr(dataset: &str, rows: &[RowView]) -> Vec<PairedComparison> {
    let Some(baseline) = rows.iter().find(|r| r.label == BASELINE && r.done() > 0) else {
        return Vec::new();
    };
    let baseline_records = baseline.records();
    rows.iter()
        .filter(|r| r.label != BASELINE && r.done() > 0)
        .filter_map(|r| compare(dataset, BASELINE, &baseline_records, &r.label, &r.records()))
        .collect()
}

/// Builds the report of every model that has results, the tuning set before the test range,
/// datasets in plan order (others after, by name). Rows planned over questions after the first are
/// the test range's.
pub fn build<'a>(plan: &[PlannedRow], found: &'a [RowResults]) -> Vec<ModelReport<'a>> {
    let groups: BTreeSet<(&str, Range)> = found.iter().map(|r| (r.model.as_str(), r.range)).collect();
    groups
        .into_iter()
        .map(|(model, range)| {
            let plan: Vec<PlannedRow> =
                plan.iter().filter(|p| p.is_test() == (range == Range::Test)).cloned().collect();
            let of_model: Vec<&RowResults> = found.iter().filter(|r| r.model == model && r.range == range).collect();
            let mut datasets: Vec<String> = Vec::new();
            for d in plan.iter().map(|p| p.dataset.as_str()) {
                if !datasets.iter().any(|x| x == d) {
                    datasets.push(d.to_string());
                }
            }
            let mut unplanned: Vec<String> =
                of_model.iter().map(|r| r.dataset.clone()).filter(|d| !datasets.contains(d)).collect();
            unplanned.sort();
            unplanned.dedup();
            datasets.extend(unplanned);
            let datasets = datasets
                .iter()
                .map(|d| {
                    let rows: Vec<&RowResults> = of_model.iter().copied().filter(|r| &r.dataset == d).collect();
                    dataset_report(d, &plan, &rows)
                })
                .collect();
            ModelReport { model: model.to_string(), range, datasets }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::report::plan::parse_plan;
    use crate::results::scored_record;

    fn found(label: &str, strategy: &str, scores: &[f64]) -> RowResults {
        let records =
            scores.iter().enumerate().map(|(i, &s)| scored_record("d", &i.to_string(), strategy, s, s)).collect();
        RowResults {
            model: "m".into(),
            range: Range::Tuning,
            dataset: "d".into(),
            label: label.into(),
            dir: PathBuf::from(label),
            records,
            run: None,
            sessions: vec![],
        }
    }

    fn fingerprint(strategy: &str, prompts: &str) -> RunFingerprint {
        RunFingerprint {
            schema: 2,
            model: "m".into(),
            retriever: None,
            k: 5,
            settings: Default::default(),
            strategy_options: [(strategy.to_string(), Default::default())].into(),
            strategy_prompts: [(strategy.to_string(), prompts.to_string())].into(),
        }
    }

    #[test]
    fn only_finished_rows_are_plotted() {
        let plan =
            parse_plan(std::path::Path::new("plan.tsv"), "rtr\td\trtr\t-\t2\ncot\td\tcot\t-\t4\n").expect("plan");
        let rows = [found("rtr", "rtr", &[1.0, 0.0]), found("cot", "cot", &[1.0])];
        let models = build(&plan, &rows);
        let labels: Vec<String> =
            crate::report::plot_points(&models[0].datasets[0].main).into_iter().map(|p| p.label).collect();
        assert_eq!(labels, ["rtr"], "cot has answered 1 of its 4 planned questions");
    }

    #[test]
    fn rows_run_with_other_prompts_are_marked_stale() {
        let plan =
            parse_plan(std::path::Path::new("plan.tsv"), "rtr\td\trtr\t-\t4\ncot\td\tcot\t-\t4\n").expect("plan");
        let now = strategy_prompts_hash(&Prompts::default(), "rtr", &Default::default()).expect("rtr builds");
        let mut rtr = found("rtr", "rtr", &[1.0, 0.0]);
        rtr.run = Some(fingerprint("rtr", &now));
        let mut cot = found("cot", "cot", &[1.0]);
        cot.run = Some(fingerprint("cot", "0123456789abcdef"));
        let rows = [rtr, cot];
        let models = build(&plan, &rows);
        let main = &models[0].datasets[0].main;
        assert_eq!(main.rows[0].stale, None, "the prompts rtr renders now");
        let why = main.rows[1].stale.as_deref().expect("cot's recorded hash is not today's");
        assert!(why.contains("0123456789abcdef"), "{why}");

        let section = crate::report::render::render_section(&models, &Default::default(), "report");
        assert!(section.contains("| cot | – | 1/4 (earlier prompts) |"), "{section}");
        assert!(section.contains("*Earlier prompts*: `cot`"), "{section}");
        assert!(section.contains("| d | cot | 1/4 (earlier prompts: restarts) |"), "all 4 left: {section}");
        assert!(section.contains("| d | rtr | 2/4 |"), "{section}");

        // Finished with earlier prompts: kept in the tables as measured, counted as a rerun in the plan.
        let mut done_cot = found("cot", "cot", &[1.0, 1.0, 0.0, 0.0]);
        done_cot.run = Some(fingerprint("cot", "0123456789abcdef"));
        let rows = [rows[0].clone(), done_cot];
        let models = build(&plan, &rows);
        let section = crate::report::render::render_section(&models, &Default::default(), "report");
        assert!(section.contains("| cot | – | 4/4 (earlier prompts) |"), "{section}");
        assert!(section.contains("| d | cot | 4/4 (earlier prompts: rerun) |"), "{section}");
        assert!(
            section.contains("0 of 2 planned rows are complete; 1 more measures earlier prompts and counts"),
            "{section}"
        );
    }

    #[test]
    fn rows_fall_into_main_and_ablation_tables_in_plan_order() {
        let plan = parse_plan(
            std::path::Path::new("plan.tsv"),
            "rtr\td\trtr\t-\t4\ntoqd\td\ttoqd\t-\t4\ntoqd-no-critique\td\ttoqd\tcritique=false\t4\n",
        )
        .expect("plan");
        let rows = [
            found("toqd-no-critique", "toqd", &[1.0, 0.0, 1.0]),
            found("rtr", "rtr", &[1.0, 1.0, 0.0, 0.0]),
            found("cot", "cot", &[0.0, 1.0]), // on disk, not in the plan
        ];
        let models = build(&plan, &rows);
        assert_eq!(models.len(), 1);
        let d = &models[0].datasets[0];
        let labels = |t: &Table| t.rows.iter().map(|r| r.label.clone()).collect::<Vec<_>>();
        assert_eq!(labels(&d.main), vec!["rtr", "toqd", "cot"], "plan order, then unplanned rows");
        assert_eq!(d.main.rows[1].done(), 0, "toqd is planned but not run");
        assert_eq!(d.main.rows[2].planned, None);
        assert_eq!(d.ablations.len(), 1);
        assert_eq!(d.ablations[0].ablated.as_deref(), Some("toqd"));
        assert_eq!(labels(&d.ablations[0]), vec!["toqd", "toqd-no-critique"], "led by the strategy's main row");
        let paired: Vec<(&str, usize)> = d.paired.iter().map(|p| (p.strategy.as_str(), p.accuracy.n)).collect();
        assert_eq!(paired, vec![("toqd-no-critique", 3), ("cot", 2)], "common questions only; toqd has none");
        let a = &d.paired[0].accuracy;
        assert_eq!((a.mean, a.wins, a.ties, a.losses), (0.0, 1, 1, 1), "1, 0, 1 against rtr's 1, 1, 0");
    }

    #[test]
    fn records_of_another_strategy_or_dataset_are_named_not_silently_dropped() {
        let plan = parse_plan(std::path::Path::new("plan.tsv"), "rtr\td\trtr\t-\t4\n").expect("plan");
        let mut rtr = found("rtr", "rtr", &[1.0, 0.0, 1.0]);
        rtr.records[1].strategy = "cot".into();
        rtr.records[2].dataset = "other".into();
        let models = build(&plan, std::slice::from_ref(&rtr));
        let notes = crate::report::left_out_records(&models);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("2 of 3 records"), "{notes:?}");
        let clean = found("rtr", "rtr", &[1.0]);
        assert!(crate::report::left_out_records(&build(&plan, std::slice::from_ref(&clean))).is_empty());
    }

    #[test]
    fn our_rows_meet_the_strongest_complete_peer() {
        let plan = parse_plan(
            std::path::Path::new("plan.tsv"),
            "ircot\td\tircot\t-\t4\niter-retgen\td\titer-retgen\t-\t4\nsearch-agent\td\tsearch-agent\t-\t4\n\
             toqd\td\ttoqd\t-\t4\n",
        )
        .expect("plan");
        let rows = [
            found("ircot", "ircot", &[1.0, 0.0, 0.0, 0.0]),
            found("iter-retgen", "iter-retgen", &[1.0, 1.0, 0.0, 0.0]),
            // The best EM, but only 3 of 4 questions: not a candidate.
            found("search-agent", "search-agent", &[1.0, 1.0, 1.0]),
            found("toqd", "toqd", &[1.0, 1.0, 1.0, 0.0]),
        ];
        let models = build(&plan, &rows);
        let peer = models[0].datasets[0].against_peer.as_ref().expect("a complete peer row");
        assert_eq!(peer.peer, "iter-retgen");
        assert_eq!(peer.candidates.len(), 2, "{:?}", peer.candidates);
        assert_eq!(peer.paired.len(), 1);
        let toqd = &peer.paired[0];
        assert_eq!((toqd.strategy.as_str(), toqd.baseline.as_str()), ("toqd", "iter-retgen"));
        assert_eq!((toqd.accuracy.wins, toqd.accuracy.ties, toqd.accuracy.losses), (1, 3, 0));

        let without = build(&plan, &rows[2..]);
        assert!(without[0].datasets[0].against_peer.is_none(), "no complete peer row, no comparison");
    }

    #[test]
    fn a_tie_on_em_goes_to_the_peer_with_the_higher_cover_em() {
        let plan = parse_plan(
            std::path::Path::new("plan.tsv"),
            "ircot\td\tircot\t-\t2\nsearch-agent\td\tsearch-agent\t-\t2\ntoqd\td\ttoqd\t-\t2\n",
        )
        .expect("plan");
        let mut later = found("search-agent", "search-agent", &[1.0, 0.0]);
        later.records[1].metrics.cover_em = 1.0;
        let rows = [found("ircot", "ircot", &[1.0, 0.0]), later, found("toqd", "toqd", &[1.0, 1.0])];
        let models = build(&plan, &rows);
        let peer = models[0].datasets[0].against_peer.as_ref().expect("a complete peer row");
        assert_eq!(peer.peer, "search-agent", "equal EM, search-agent covers one more gold answer");

        let even = [found("ircot", "ircot", &[1.0, 0.0]), found("search-agent", "search-agent", &[1.0, 0.0])];
        let models = build(&plan, &even);
        let peer = models[0].datasets[0].against_peer.as_ref().expect("a complete peer row");
        assert_eq!(peer.peer, "ircot", "all three equal: the earlier in plan order");
    }
}
