//! The training-free multi-hop methods a user would compare hopwise with, each faithful to its paper
//! and built from the shared parts (the metered context, the answer protocol, the trace recorder).
//! Each module names its paper and where it departs from it.

pub mod ircot;
pub mod iter_retgen;
pub mod search_agent;

use hopwise_core::{NodeTrace, Passage};

/// Adds the passages of `found` not yet in `pool` (by id) while the pool holds fewer than `cap`;
/// returns how many were added.
pub(crate) fn accumulate(pool: &mut Vec<Passage>, found: &[Passage], cap: usize) -> usize {
    let before = pool.len();
    for p in found {
        if pool.len() >= cap {
            break;
        }
        if !pool.iter().any(|q| q.id == p.id) {
            pool.push(p.clone());
        }
    }
    pool.len() - before
}

/// A node of a peer's chain: step `i` follows step `i - 1`.
pub(crate) fn chain_node(step: usize, question: &str) -> NodeTrace {
    let parents = if step > 1 { vec![(step - 1).to_string()] } else { Vec::new() };
    NodeTrace { id: step.to_string(), question: question.to_string(), parents, ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str) -> Passage {
        Passage { id: id.into(), ..Default::default() }
    }

    #[test]
    fn accumulate_keeps_order_skips_duplicates_and_stops_at_the_cap() {
        let mut pool = vec![p("a")];
        assert_eq!(accumulate(&mut pool, &[p("a"), p("b"), p("c")], 3), 2);
        assert_eq!(pool.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(accumulate(&mut pool, &[p("d")], 3), 0);
    }
}
