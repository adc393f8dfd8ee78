//! The MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned in `.ci/test`, run by
//! Node 22 from the npm registry) against the hub's `/mcp`, with one virtual device offering the
//! suite's fixture tools (`--demo-profile conformance`) under their own names (`--mcp-names plain`),
//! so the suite checks what the bridge forwards from a device link.
//!
//! Two runs: the default (active) suite, which speaks the initialize-era versions, and exactly
//! the scenarios protocol 2026-07-28 requires (`server/discover`, stateless requests, listen
//! streams, caching hints, header validation). Both must exit 0 with
//! `tests/conformance/expected-failures.yml`, which lists only what does not apply to a hub of
//! tool-only devices, each with its reason. The test also reads the suite's per-scenario results
//! and checks that the scenarios that apply did run and passed every check, so a suite that
//! silently skips them cannot pass.
//!
//! `.ci/test` installs both and sets `MCPDEV_TEST_NODE22` and `MCPDEV_TEST_CONFORMANCE`; a missing
//! one is a failure, not a skip.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{HubProcess, installed, mcpdev, repo_path};
use serde_json::Value;

/// A full run takes seconds; this is only the point where a hang becomes a failure.
const RUN_DEADLINE: Duration = Duration::from_secs(300);



fn node22() -> PathBuf {
    installed("MCPDEV_TEST_NODE22", repo_path(".ci/node22/node_modules/node/bin/node"), "Node 22 (npm package node@22)")
}

fn conformance_cli() -> PathBuf {
    installed(
        "MCPDEV_TEST_CONFORMANCE",
        repo_path(".ci/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        "MCP conformance suite (npm @modelcontextprotocol/conformance)",
    )
}

/// Runs `conformance server` against `url` with `extra` arguments, writing results to `out`.
async fn run_suite(url: &str, extra: &[&str], out: &Path) -> (i32, String) {
    let node = node22();
    let mut cmd = tokio::process::Command::new(&node);
    cmd.arg(conformance_cli())
        .args(["server", "--url", url, "--expected-failures"])
        .arg(repo_path("tests/conformance/expected-failures.yml"))
        .args(extra)
        .arg("-o")
        .arg(out)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    // Anything the suite starts with `node` gets Node 22 too.
    let path = std::env::join_paths(
        [node.parent().unwrap().to_path_buf()].into_iter().chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    cmd.env("PATH", path);
    let output = tokio::time::timeout(RUN_DEADLINE, cmd.output()).await.expect("the conformance suite hung").expect("run node");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

/// Scenario -> [(check id, status)], from the suite's `<out>/server-<scenario>-<time>/checks.json`.
fn results(out: &Path) -> BTreeMap<String, Vec<(String, String)>> {
    let mut by_scenario = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        // The suffix is `-YYYY-MM-DDTHH-MM-SS-mmmZ`.
        let scenario = name.strip_prefix("server-").and_then(|n| n.get(..n.len().checked_sub(25)?)).unwrap_or_else(|| panic!("unexpected result dir {name}"));
        let checks: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(dir.join("checks.json")).unwrap()).unwrap();
        let checks = checks.iter().map(|c| (c["id"].as_str().unwrap().to_string(), c["status"].as_str().unwrap().to_string())).collect();
        by_scenario.insert(scenario.to_string(), checks);
    }
    by_scenario
}

/// Every `scenario` ran and had no failing check (FAILURE or WARNING) but the `excused` ones.
fn assert_passed(run: &str, results: &BTreeMap<String, Vec<(String, String)>>, scenarios: &[&str], excused: &[(&str, &str)]) {
    for scenario in scenarios {
        let checks = results.get(*scenario).unwrap_or_else(|| panic!("{run}: scenario {scenario} did not run; ran {:?}", results.keys()));
        assert!(checks.iter().any(|(_, s)| s == "SUCCESS"), "{run}: {scenario} passed no check: {checks:?}");
        let failing: BTreeSet<&str> = checks.iter().filter(|(_, s)| s == "FAILURE" || s == "WARNING").map(|(id, _)| id.as_str()).collect();
        let allowed: BTreeSet<&str> = excused.iter().filter(|(s, _)| s == scenario).map(|(_, id)| *id).collect();
        assert_eq!(failing, allowed, "{run}: failing checks of {scenario}: {checks:?}");
    }
}

/// The tool scenarios: their fixtures come from the virtual device, through the bridge.
const TOOL_SCENARIOS: [&str; 7] = [
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
];

#[tokio::test]
async fn the_conformance_suite_passes_against_the_hub() {
    let hub = HubProcess::start(&["--demo", "1", "--demo-profile", "conformance", "--mcp-names", "plain"], &[]).await;
    // The suite lists tools once: the virtual device must be onboarded first.
    let tools = mcpdev(&hub, &["tools", "list", "--json", "-d", "02:00:00:00:00:01", "--wait", "30s"]).await;
    assert_eq!(tools.code, 0, "{tools:?}");
    let listed = tools.json();
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).filter(|n| n.starts_with("test_")).collect();
    assert_eq!(
        names,
        ["test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource", "test_multiple_content_types", "test_error_handling"]
    );
    let url = format!("{}/mcp", hub.host_url);
    let out = tempfile::tempdir().unwrap();

    // The active suite: initialize-era protocol versions.
    let active = out.path().join("active");
    let (code, text) = run_suite(&url, &[], &active).await;
    assert_eq!(code, 0, "conformance (active suite) failed:\n{text}");
    assert!(text.contains("Baseline check passed: all failures are expected."), "{text}");
    let mut must_pass = vec![
        "server-initialize",
        "server-session-lifecycle",
        "ping",
        "completion-complete",
        "server-sse-multiple-streams",
        "resources-list",
        "resources-subscribe",
        "resources-unsubscribe",
        "dns-rebinding-protection",
    ];
    must_pass.extend(TOOL_SCENARIOS);
    assert_passed("active suite", &results(&active), &must_pass, &[]);

    // Exactly what 2026-07-28 requires: server/discover, stateless requests, listen streams.
    let modern = out.path().join("2026-07-28");
    let (code, text) = run_suite(&url, &["--requirements", "2026-07-28"], &modern).await;
    assert_eq!(code, 0, "conformance (2026-07-28 requirements) failed:\n{text}");
    assert!(text.contains("Baseline check passed: all failures are expected."), "{text}");
    let mut must_pass = vec![
        "server-stateless",
        "completion-complete",
        "server-sse-multiple-streams",
        "resources-list",
        "sep-2164-resource-not-found",
        "dns-rebinding-protection",
        "caching",
        "http-header-validation",
        "input-required-result-unsupported-methods",
        "input-required-result-validate-input",
    ];
    must_pass.extend(TOOL_SCENARIOS);
    // The checks excused in expected-failures.yml (the fixtures they need are not device tools).
    let excused = [
        ("server-stateless", "sep-2575-server-rejects-undeclared-capability"),
        ("server-stateless", "sep-2575-missing-capability-http-400"),
        ("server-stateless", "sep-2575-http-server-no-independent-requests-on-stream"),
        ("server-stateless", "sep-2575-server-no-log-without-loglevel"),
        ("server-stateless", "sep-2575-server-sends-tools-list-changed-on-subscription"),
        ("caching", "sep-2549-prompts-list-caching-hints"),
    ];
    assert_passed("2026-07-28", &results(&modern), &must_pass, &excused);
}

/// The suite's client scenarios, with mcpdev as the client (`--url`, through
/// `tests/conformance/mcpdev_client.sh`): the handshake, a tool call, and a Streamable HTTP
/// stream that the server closes before its answer, which the client must resume (`GET` with
/// `Last-Event-ID`, after the server's `retry`). The suite has no stdio runner: its client
/// scenarios serve over HTTP.
#[tokio::test]
async fn mcpdev_as_a_client_passes_the_suites_client_scenarios() {
    let node = node22();
    for scenario in ["initialize", "tools_call", "sse-retry"] {
        let out = tempfile::tempdir().unwrap();
        let mut cmd = tokio::process::Command::new(&node);
        cmd.arg(conformance_cli())
            .args(["client", "--command"])
            .arg(repo_path("tests/conformance/mcpdev_client.sh"))
            .args(["--scenario", scenario, "-o"])
            .arg(out.path())
            .env("MCPDEV_BIN", env!("CARGO_BIN_EXE_mcpdev"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(RUN_DEADLINE, cmd.output()).await.expect("the conformance suite hung").expect("run node");
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.status.code(), Some(0), "client scenario {scenario}:\n{text}");
        let dir = std::fs::read_dir(out.path()).unwrap().next().expect("a result directory").unwrap().path();
        let checks: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(dir.join("checks.json")).unwrap()).unwrap();
        assert!(checks.iter().any(|c| c["status"] == "SUCCESS"), "{scenario}: no check passed: {checks:?}");
        assert!(!checks.iter().any(|c| c["status"] == "FAILURE" || c["status"] == "WARNING"), "{scenario}: {checks:?}");
    }
}
