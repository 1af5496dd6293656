//! `lookup`: decode speed of recorded calls with and without prompt-lookup decoding, one call at a
//! time on the continuous engine, the two variants alternating call by call.

use std::collections::BTreeMap;
use std::time::Duration;

use hopwise_core::GenParams;
use hopwise_llama::LocalLlm;

use crate::replay::greedy;
use crate::workload::Call;

#[derive(Default)]
struct Side {
    tokens: usize,
    decode: Duration,
    steps: usize,
}

impl Side {
    fn rate(&self) -> f64 {
        self.tokens as f64 / self.decode.as_secs_f64().max(1e-9)
    }
}

#[derive(Default)]
struct Row {
    calls: usize,
    identical: usize,
    with: Side,
    without: Side,
    accepted: usize,
    drafted: usize,
}

pub async fn lookup(llm: &LocalLlm, calls: &[Call]) -> Result<(), Box<dyn std::error::Error>> {
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    for (number, call) in calls.iter().enumerate() {
        let request = greedy(&call.request);
        let switched = |on: bool| {
            let mut request = request.clone();
            request.params = GenParams { prompt_lookup: Some(on), ..request.params };
            request
        };
        // Alternate which variant runs first, so a warm prefix cache favours neither.
        let order = if number % 2 == 0 { [true, false] } else { [false, true] };
        let mut results = Vec::new();
        for on in order {
            results.push((on, llm.generate(&switched(on)).await?));
        }
        let row = rows.entry(call.purpose.clone()).or_default();
        row.calls += 1;
        let texts: Vec<&str> = results.iter().map(|(_, g)| g.response.text()).collect();
        row.identical += usize::from(texts[0] == texts[1]);
        for (on, generation) in results {
            let side = if on { &mut row.with } else { &mut row.without };
            side.tokens += generation.timing.generated_tokens;
            side.decode += generation.timing.decode_time;
            side.steps += generation.timing.decode_steps;
            if on {
                row.accepted += generation.timing.accepted_draft_tokens;
                row.drafted += generation.timing.drafted_tokens;
            }
        }
    }
    println!("| call | calls | output tokens | tok/s with lookup | tok/s without | ratio | decode steps with / without | drafts accepted | identical outputs |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut all = Row::default();
    for (purpose, row) in &rows {
        print_row(purpose, row);
        all.calls += row.calls;
        all.identical += row.identical;
        all.accepted += row.accepted;
        all.drafted += row.drafted;
        for (total, side) in [(&mut all.with, &row.with), (&mut all.without, &row.without)] {
            total.tokens += side.tokens;
            total.decode += side.decode;
            total.steps += side.steps;
        }
    }
    print_row("**all**", &all);
    Ok(())
}

fn print_row(name: &str, row: &Row) {
    println!(
        "| {name} | {} | {} | {:.1} | {:.1} | {:.2}x | {} / {} | {} of {} | {} of {} |",
        row.calls,
        row.with.tokens,
        row.with.rate(),
        row.without.rate(),
        row.with.rate() / row.without.rate().max(1e-9),
        row.with.steps,
        row.without.steps,
        row.accepted,
        row.drafted,
        row.identical,
        row.calls
    );
}
