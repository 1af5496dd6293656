//! The generated settings block of `docs/configuration.md`: every key of the file with its default,
//! flag, variable and meaning, each from its one declaration.

use crate::settings;
use crate::{
    BudgetConfig, BudgetOverrides, GeneralOverrides, GeneralSettings, ModelOverrides, RemoteConfig, RemoteOverrides,
    RetrievalOverrides, RetrievalSettings, RunOverrides, RunSettings, ServeConfig, ServeOverrides,
};

const REFERENCE_BEGIN: &str = "<!-- settings:begin (generated from each section's declaration; `HOPWISE_BLESS=1 cargo test -p hopwise-config reference` rewrites it) -->";
const REFERENCE_END: &str = "<!-- settings:end -->";

/// The generated block of `docs/configuration.md`: every key of the file with its default, flag,
/// variable and meaning, and the model flags, each from its one declaration.
pub fn reference_block() -> String {
    let top_level = [
        section_reference::<GeneralSettings, GeneralOverrides>("", GeneralSettings::KEYS),
        section_reference::<RunSettings, RunOverrides>("", RunSettings::KEYS),
        section_reference::<RetrievalSettings, RetrievalOverrides>("", RetrievalSettings::KEYS),
    ];
    // One table: the groups differ only in where their flags apply, which `--help` says.
    let top_level = top_level
        .iter()
        .enumerate()
        .map(|(i, table)| {
            if i == 0 {
                table.as_str()
            } else {
                table.split_once("|---|---|---|---|---|\n").map_or("", |(_, rows)| rows)
            }
        })
        .collect::<String>();
    let budget = section_reference::<BudgetConfig, BudgetOverrides>("budget", BudgetConfig::KEYS);
    let model = settings::flag_table(&<ModelOverrides as clap::Args>::augment_args(clap::Command::new("model")));
    let serve = section_reference::<ServeConfig, ServeOverrides>("serve", ServeConfig::KEYS);
    let remote = section_reference::<RemoteConfig, RemoteOverrides>("remote", RemoteConfig::KEYS);
    format!(
        "{REFERENCE_BEGIN}\n### Top-level keys\n\n{top_level}\n### `[budget]`\n\n{budget}\n### `[llms.NAME]` from flags\n\n\
         These flags edit the backend that `llm` selects; the file sets the same fields in its `[llms.NAME]`.\n\n{model}\n\
         ### `[serve]`\n\n{serve}\n### `[remote]`\n\n{remote}{REFERENCE_END}"
    )
}

/// The reference table of one section: its keys with their defaults and flags.
fn section_reference<S: Default + serde::Serialize, O: clap::Args>(table: &str, keys: &[settings::Key]) -> String {
    let defaults = toml::Table::try_from(S::default()).unwrap_or_default();
    settings::reference_table(table, keys, &defaults, &O::augment_args(clap::Command::new("section")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference tables in `docs/configuration.md` are what the declarations say.
    #[test]
    fn reference_tables_match_the_declarations() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
        let doc = std::fs::read_to_string(&path).expect("docs/configuration.md");
        let (Some(start), Some(end)) = (doc.find("<!-- settings:begin"), doc.find(REFERENCE_END)) else {
            panic!("docs/configuration.md has no settings block")
        };
        let current = &doc[start..end + REFERENCE_END.len()];
        let fresh = reference_block();
        if current != fresh && std::env::var_os("HOPWISE_BLESS").is_some() {
            std::fs::write(&path, doc.replacen(current, &fresh, 1)).expect("rewrite docs/configuration.md");
            return;
        }
        assert_eq!(
            current, fresh,
            "docs/configuration.md is stale: HOPWISE_BLESS=1 cargo test -p hopwise-config reference"
        );
        for key in ServeConfig::KEYS.iter().chain(RemoteConfig::KEYS).filter(|k| k.in_file()) {
            assert!(fresh.contains(&format!(".{}` |", key.name)), "{} is documented", key.name);
        }
        assert!(!RemoteConfig::KEYS.iter().any(|k| k.name == "typesense_api_key" && k.in_file()), "secrets: flag only");
        assert!(fresh.contains("| – (flag or variable only) | – | `--typesense-api-key` |"), "{fresh}");
        assert!(fresh.contains("| `serve.bind` | `\"127.0.0.1:8080\"` | `--bind` | `HOPWISE_SERVE_BIND` |"), "{fresh}");
        assert!(fresh.contains("| `remote.timeout_secs` | `30.0` | – | – |"), "{fresh}");
    }
}
