//! README's strategy table and ToQD's defaults are generated from the code, so the front page cannot
//! drift from what runs. `HOPWISE_BLESS=1` rewrites the blocks in place.

use hopwise_reason::strategy::STRATEGIES;
use hopwise_reason::toqd::ToqdOptions;

const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");

fn strategy_table() -> String {
    let mut out = String::from("| strategy | what it does |\n|---|---|\n");
    for s in STRATEGIES {
        out.push_str(&format!("| `{}` | {} |\n", s.name, s.description.replace('|', "\\|")));
    }
    out
}

fn toqd_defaults() -> String {
    let value = serde_json::to_value(ToqdOptions::default()).expect("options serialise");
    let mut out = String::from("| option | default |\n|---|---|\n");
    for (key, v) in value.as_object().expect("an object") {
        out.push_str(&format!("| `{key}` | `{v}` |\n"));
    }
    out
}

/// Replaces the body of the block opened by `<!-- NAME:begin … -->` with `body`.
fn with_block(text: &str, name: &str, body: &str) -> String {
    let open = format!("<!-- {name}:begin");
    let close = format!("<!-- {name}:end -->");
    let start = text.find(&open).unwrap_or_else(|| panic!("README has no {open} block"));
    let body_at = start + text[start..].find('\n').expect("a line after the opening marker") + 1;
    let end = text.find(&close).unwrap_or_else(|| panic!("README has no {close}"));
    format!("{}{}{}", &text[..body_at], body, &text[end..])
}

#[test]
fn readme_blocks_match_the_code() {
    let text = std::fs::read_to_string(README).expect("read README.md");
    let want = with_block(&with_block(&text, "strategies", &strategy_table()), "toqd-options", &toqd_defaults());
    if std::env::var_os("HOPWISE_BLESS").is_some() {
        std::fs::write(README, &want).expect("write README.md");
        return;
    }
    assert!(text == want, "README.md's generated blocks are stale; rerun with HOPWISE_BLESS=1");
    assert!(text.len() <= 12 * 1024, "README.md is {} bytes; the front page stays under 12 KiB", text.len());
}
