//! HGOT thought parsing: `Rationale: … [n]` / `Answer: …` replies and their statements.
#![no_main]

use hopwise_reason::hgot::{parse_thought, split_statements};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let thought = parse_thought(text);
    assert!(!thought.answer.contains('\n'));
    for statement in split_statements(&thought.rationale) {
        assert!(!statement.claim.is_empty());
    }
});
