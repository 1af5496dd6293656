//! A configuration mistake stops `ask`, `eval`, `serve` and `hopwise config` before any work, with
//! an error that names it: an unknown `[strategies.NAME]` section, an invalid strategy option, a
//! bad prompt override, an unknown strategy name. No model or index is needed to see it.

mod common;

use common::hopwise_command;

const MISTAKES: [(&str, &str); 5] = [
    (
        "[strategies.toqdd]\ncritique = false\n",
        "[strategies.toqdd]: no strategy is called `toqdd` (did you mean `toqd`?)",
    ),
    (
        "[strategies.toqd]\ncritiqe = false\n",
        "[strategies.toqd]: invalid option: strategy `toqd`: unknown field `critiqe`",
    ),
    ("[strategies.uar]\nsamples = 1\n", "[strategies.uar]: invalid option: strategy `uar`: samples = 1"),
    (
        "[prompts]\ntoqd_self_verify = \"Q: {nope}\"\n",
        "prompt overrides: prompt template `toqd_self_verify`: unknown placeholder `{nope}`",
    ),
    ("strategy = \"tqod\"\n", "unknown strategy `tqod`"),
];

fn commands(dir: &std::path::Path) -> Vec<Vec<String>> {
    let out = dir.join("out").display().to_string();
    let dataset = dir.join("data.jsonl").display().to_string();
    vec![
        vec!["ask".into(), "Who wrote Dune?".into()],
        vec!["eval".into(), "--dataset".into(), dataset, "--strategy".into(), "cot".into(), "--out".into(), out],
        vec!["serve".into(), "--bind".into(), "127.0.0.1:9".into()],
        vec!["config".into()],
    ]
}

#[test]
fn each_mistake_stops_each_command_with_a_named_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("data.jsonl"), "{\"id\": \"1\", \"question\": \"q\", \"answer\": \"a\"}\n")
        .expect("dataset");
    for (i, (text, message)) in MISTAKES.iter().enumerate() {
        let config = tmp.path().join(format!("mistake{i}.toml"));
        std::fs::write(&config, text).expect("write config");
        for args in commands(tmp.path()) {
            let out = hopwise_command().arg("--config").arg(&config).args(&args).output().expect("run hopwise");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "`hopwise {}` accepted {text:?}", args[0]);
            assert!(stderr.contains(message), "`hopwise {}` on {text:?} said: {stderr}", args[0]);
        }
    }
}

/// A variable set to nothing is no setting: the file's value stays, and no command refuses to start
/// (a path flag's parser would otherwise reject the empty value).
#[test]
fn empty_variables_leave_the_files_values() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = tmp.path().join("hopwise.toml");
    std::fs::write(&config, "index = \"/srv/my-index\"\nstrategy = \"rtr\"\n").expect("write config");
    let out = hopwise_command()
        .arg("--config")
        .arg(&config)
        .arg("config")
        .env("HOPWISE_INDEX", "")
        .env("HOPWISE_HOME", "")
        .env("HOPWISE_STRATEGY", "")
        .output()
        .expect("run hopwise");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("index = \"/srv/my-index\"") && stdout.contains("strategy = \"rtr\""), "{stdout}");
    assert!(!stdout.contains("home ="), "{stdout}");
}

/// `hopwise strategies NAME` shows one strategy's options at their defaults, and a misspelt name is
/// an error that suggests the right one.
#[test]
fn a_strategy_is_shown_with_its_options_and_a_misspelt_one_is_named() {
    let out = hopwise_command().args(["strategies", "toqd-paper", "--json"]).output().expect("run hopwise");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(shown["name"], "toqd-paper");
    assert_eq!(shown["options"]["critique"], true);
    assert_eq!(shown["options"]["hedges"], false);
    let out = hopwise_command().args(["strategies", "toqdd"]).output().expect("run hopwise");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no strategy `toqdd` (did you mean `toqd`?)"), "{stderr}");
}

/// A reader that stops early (`hopwise strategies --json | head -1`) ends the command quietly
/// with the SIGPIPE status, not a panic.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let mut child = hopwise_command()
        .args(["strategies", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run hopwise");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(matches!(out.status.code(), Some(0 | 141)), "{:?}: {stderr}", out.status);
}
