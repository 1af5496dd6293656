//! A missing or damaged model file is an error that names the file and the setup command.

mod common;

use hopwise_embed::{ensure_embedder_model, EmbedError, MiniLmEmbedder, MiniLmOptions, Precision};

const SETUP: &str = "hopwise setup --fetch all-minilm-l6-v2";

/// A copy of the installed model in a temporary directory, for breaking one file.
fn model_copy() -> tempfile::TempDir {
    let installed = ensure_embedder_model(&common::home()).expect("fetch all-MiniLM-L6-v2");
    let copy = tempfile::tempdir().expect("tempdir");
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(installed.join(file), copy.path().join(file)).expect("copy model file");
    }
    copy
}

fn load(dir: &std::path::Path) -> Result<MiniLmEmbedder, EmbedError> {
    MiniLmEmbedder::load(dir, MiniLmOptions { threads: 1, precision: Precision::Int8, ..MiniLmOptions::default() })
}

#[test]
fn a_missing_weights_file_names_the_setup_command() {
    let dir = model_copy();
    std::fs::remove_file(dir.path().join("model.safetensors")).expect("remove");
    let err = load(dir.path()).err().expect("must fail");
    assert!(matches!(err, EmbedError::MissingFile(_)), "{err}");
    let message = err.to_string();
    assert!(message.contains("model.safetensors") && message.contains(SETUP), "{message}");
}

#[test]
fn damaged_model_files_name_the_file_and_the_setup_command() {
    for (file, damage) in [
        ("model.safetensors", &b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}"[..]),
        ("tokenizer.json", &b"{\"truncated"[..]),
        ("config.json", &b"[]"[..]),
    ] {
        let dir = model_copy();
        std::fs::write(dir.path().join(file), damage).expect("damage");
        let err = load(dir.path()).err().expect("must fail");
        assert!(matches!(err, EmbedError::Damaged { .. }), "{file}: {err}");
        let message = err.to_string();
        assert!(message.contains(file) && message.contains(SETUP), "{message}");
    }
}

#[test]
fn a_truncated_weights_file_is_damaged_not_a_panic() {
    let dir = model_copy();
    let path = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&path).expect("read");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");
    let err = load(dir.path()).err().expect("must fail");
    assert!(matches!(err, EmbedError::Damaged { .. }), "{err}");
}
