//! ToQD topology edges: the first byte picks the number of sub-questions, the rest is the reply.
#![no_main]

use hopwise_reason::protocol::{parse_edges, GraphNode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let n = usize::from(n % 12);
    let topology = parse_edges(text, n, "fuzz");
    for (from, to) in &topology.edges {
        assert_ne!(from, to);
        assert_ne!(*from, GraphNode::Sink);
        if let GraphNode::Sub(i) = from {
            assert!((1..=n).contains(i));
        }
        if let GraphNode::Sub(i) = to {
            assert!((1..=n).contains(i));
        }
    }
});
