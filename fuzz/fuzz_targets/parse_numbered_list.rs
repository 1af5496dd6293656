//! Numbered sub-question lists.
#![no_main]

use hopwise_reason::protocol::parse_numbered_list;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for item in parse_numbered_list(text) {
        assert!(!item.trim().is_empty());
    }
});
