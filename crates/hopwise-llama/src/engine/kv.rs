//! Our own account of llama.cpp's KV cache: which tokens each sequence holds and which cells they
//! occupy.
//!
//! With a unified cache, copying a prefix from one sequence to another only tags the same cells with
//! the second sequence, and a cell is freed when no sequence holds it any more. Mirroring that here
//! tells the scheduler exactly how many cells are in use, which cells evicting a cached sequence would
//! free, and which tokens each sequence's cells hold (what the prefix cache matches against), without
//! asking llama.cpp. Every change goes through [`Kv`], which applies it to both sides at once.

use std::collections::HashMap;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::token::LlamaToken;

use super::runtime;
use crate::error::Result;

/// A sequence's tokens in position order, and the cell holding each.
#[derive(Debug, Default)]
struct Held {
    tokens: Vec<LlamaToken>,
    cells: Vec<u64>,
}

/// The pure bookkeeping: sequence ids, their tokens, and per-cell holder counts.
#[derive(Debug)]
pub(crate) struct Ledger {
    capacity: usize,
    /// Indexed by sequence id; `None` is a free id.
    sequences: Vec<Option<Held>>,
    holders: HashMap<u64, u32>,
    next_cell: u64,
}

impl Ledger {
    pub fn new(capacity: usize, max_sequences: usize) -> Self {
        Self { capacity, sequences: (0..max_sequences).map(|_| None).collect(), holders: HashMap::new(), next_cell: 0 }
    }

    /// Cells held by at least one sequence.
    pub fn used(&self) -> usize {
        self.holders.len()
    }

    pub fn free_cells(&self) -> usize {
        self.capacity.saturating_sub(self.used())
    }

    pub fn free_ids(&self) -> usize {
        self.sequences.iter().filter(|held| held.is_none()).count()
    }

    /// Takes a free sequence id.
    pub fn allocate(&mut self) -> Option<i32> {
        let index = self.sequences.iter().position(Option::is_none)?;
        self.sequences[index] = Some(Held::default());
        i32::try_from(index).ok()
    }

    fn held(&self, seq: i32) -> Option<&Held> {
        usize::try_from(seq).ok().and_then(|index| self.sequences.get(index)).and_then(Option::as_ref)
    }

    fn held_mut(&mut self, seq: i32) -> Option<&mut Held> {
        usize::try_from(seq).ok().and_then(|index| self.sequences.get_mut(index)).and_then(Option::as_mut)
    }

    /// The tokens whose cells `seq` holds, in position order.
    pub fn tokens(&self, seq: i32) -> &[LlamaToken] {
        self.held(seq).map_or(&[], |held| held.tokens.as_slice())
    }

    pub fn len(&self, seq: i32) -> usize {
        self.tokens(seq).len()
    }

    /// Records tokens just decoded into `seq` at its next positions, each in a new cell.
    pub fn append(&mut self, seq: i32, tokens: &[LlamaToken]) {
        let first = self.next_cell;
        let Some(held) = self.held_mut(seq) else { return };
        held.tokens.extend_from_slice(tokens);
        held.cells.extend(first..first + tokens.len() as u64);
        self.next_cell += tokens.len() as u64;
        for cell in first..self.next_cell {
            self.holders.insert(cell, 1);
        }
    }

    /// `dst` (empty) takes the first `len` cells of `src`.
    pub fn copy_prefix(&mut self, src: i32, dst: i32, len: usize) {
        let Some(source) = self.held(src) else { return };
        let len = len.min(source.tokens.len());
        let (tokens, cells) = (source.tokens[..len].to_vec(), source.cells[..len].to_vec());
        for cell in &cells {
            *self.holders.entry(*cell).or_insert(0) += 1;
        }
        if let Some(held) = self.held_mut(dst) {
            held.tokens = tokens;
            held.cells = cells;
        }
    }

    /// `seq` lets go of its cells from position `len` on.
    pub fn truncate(&mut self, seq: i32, len: usize) {
        let Some(held) = self.held_mut(seq) else { return };
        if len >= held.tokens.len() {
            return;
        }
        held.tokens.truncate(len);
        let dropped = held.cells.split_off(len);
        for cell in dropped {
            if let Some(count) = self.holders.get_mut(&cell) {
                *count -= 1;
                if *count == 0 {
                    self.holders.remove(&cell);
                }
            }
        }
    }

    /// Lets go of all of `seq`'s cells and frees its id.
    pub fn release(&mut self, seq: i32) {
        self.truncate(seq, 0);
        if let Some(slot) = usize::try_from(seq).ok().and_then(|index| self.sequences.get_mut(index)) {
            *slot = None;
        }
    }

    /// Cells only `seq` holds: what releasing it frees.
    pub fn exclusive(&self, seq: i32) -> usize {
        self.held(seq).map_or(0, |held| held.cells.iter().filter(|cell| self.holders.get(cell) == Some(&1)).count())
    }

    /// Sequence ids in use.
    pub fn live_ids(&self) -> impl Iterator<Item = i32> + '_ {
        self.sequences
            .iter()
            .enumerate()
            .filter(|(_, held)| held.is_some())
            .filter_map(|(id, _)| i32::try_from(id).ok())
    }

    /// Forgets everything (after llama.cpp's cache was cleared).
    pub fn reset(&mut self) {
        for slot in &mut self.sequences {
            *slot = None;
        }
        self.holders.clear();
    }
}

/// Length of the common prefix of two token lists.
pub(crate) fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The ledger together with the llama.cpp calls it mirrors.
pub(crate) struct Kv {
    pub ledger: Ledger,
}

impl Kv {
    pub fn truncate(&mut self, context: &mut LlamaContext<'_>, seq: i32, len: usize) -> Result<()> {
        if len >= self.ledger.len(seq) {
            return Ok(());
        }
        let from = u32::try_from(len).map_err(runtime)?;
        context.kv_cache_seq_rm(seq, Some(from), None).map_err(runtime)?;
        self.ledger.truncate(seq, len);
        Ok(())
    }

    pub fn copy_prefix(&mut self, context: &mut LlamaContext<'_>, src: i32, dst: i32, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let end = u32::try_from(len).map_err(runtime)?;
        context.kv_cache_seq_cp(src, dst, Some(0), Some(end)).map_err(runtime)?;
        self.ledger.copy_prefix(src, dst, len);
        Ok(())
    }

    pub fn release(&mut self, context: &mut LlamaContext<'_>, seq: i32) -> Result<()> {
        let removed = self.truncate(context, seq, 0);
        self.ledger.release(seq);
        removed
    }

    /// Drops every cell on both sides.
    pub fn clear(&mut self, context: &mut LlamaContext<'_>) {
        context.clear_kv_cache();
        self.ledger.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(ids: &[i32]) -> Vec<LlamaToken> {
        ids.iter().map(|id| LlamaToken(*id)).collect()
    }

    #[test]
    fn shared_prefixes_are_counted_once_and_freed_with_their_last_holder() {
        let mut ledger = Ledger::new(100, 4);
        let a = ledger.allocate().unwrap();
        ledger.append(a, &tokens(&[1, 2, 3, 4, 5]));
        let b = ledger.allocate().unwrap();
        ledger.copy_prefix(a, b, 3);
        ledger.append(b, &tokens(&[9, 9]));
        assert_eq!(ledger.tokens(b), tokens(&[1, 2, 3, 9, 9]).as_slice());
        assert_eq!(ledger.used(), 7, "three shared cells, two of a's own, two of b's own");
        assert_eq!(ledger.exclusive(a), 2);
        assert_eq!(ledger.exclusive(b), 2);

        ledger.release(a);
        assert_eq!(ledger.used(), 5, "the shared prefix stays with b");
        assert_eq!(ledger.exclusive(b), 5);
        assert_eq!(ledger.free_ids(), 3);
        ledger.truncate(b, 1);
        assert_eq!((ledger.used(), ledger.len(b)), (1, 1));
        ledger.release(b);
        assert_eq!((ledger.used(), ledger.free_cells(), ledger.free_ids()), (0, 100, 4));
    }

    #[test]
    fn ids_run_out_and_come_back() {
        let mut ledger = Ledger::new(10, 2);
        let first = ledger.allocate().unwrap();
        assert!(ledger.allocate().is_some());
        assert_eq!(ledger.allocate(), None);
        ledger.release(first);
        assert_eq!(ledger.allocate(), Some(first));
        assert_eq!(ledger.live_ids().count(), 2);
        ledger.reset();
        assert_eq!(ledger.live_ids().count(), 0);
    }

    #[test]
    fn copying_more_than_the_source_holds_copies_what_it_has() {
        let mut ledger = Ledger::new(10, 2);
        let a = ledger.allocate().unwrap();
        ledger.append(a, &tokens(&[1, 2]));
        let b = ledger.allocate().unwrap();
        ledger.copy_prefix(a, b, 5);
        assert_eq!(ledger.len(b), 2);
        assert_eq!(common_prefix(&tokens(&[1, 2, 3]), ledger.tokens(b)), 2);
        // Operations on ids that are not allocated change nothing.
        ledger.append(7, &tokens(&[1]));
        ledger.truncate(-1, 0);
        ledger.release(9);
        assert_eq!(ledger.len(7), 0);
        assert_eq!(ledger.used(), 2);
    }
}
