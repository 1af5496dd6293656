//! HGOT plan parsing: steps, dependency sentences, formal edges and their repair never panic, and
//! the repaired graph only points from earlier to later steps.
#![no_main]

use hopwise_reason::hgot::{
    dependency_text, parse_dependency_sentences, parse_formal_edges, parse_steps, repair_dependencies,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let steps = parse_steps(text, 6, "fuzz");
    assert!(steps.len() <= 6);
    assert_eq!(steps.texts.len(), steps.labels.len());
    let mut raw = parse_dependency_sentences(&dependency_text(text));
    raw.extend(parse_formal_edges(text));
    let (mapped, _) = steps.map_labels(&raw, "fuzz");
    let deps = repair_dependencies(steps.len(), &mapped, "fuzz");
    for &(a, b) in &deps.edges {
        assert!(1 <= a && a < b && b <= steps.len());
    }
});
