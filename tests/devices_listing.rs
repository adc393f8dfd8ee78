//! Issue 24: `mcpdev devices` reads the fleet a page at a time and writes it as pages arrive;
//! `--json` keeps its one-array shape, `--ndjson` is one device per line. Driven over the hub's
//! real listeners with `mcpdev sim` fleets; every wait polls with a deadline.

mod common;

use std::time::{Duration, Instant};

use common::{HubProcess, mcpdev, spawn_mcpdev};
use mcpdev::links::hub_client::HubClient;
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `devices --json` until `n` devices are ready.
async fn wait_ready(hub: &HubProcess, n: usize) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let out = mcpdev(hub, &["devices", "--json"]).await;
        let ready = out.json().as_array().map_or(0, |a| a.iter().filter(|d| d["phase"] == "ready").count());
        if ready >= n {
            return;
        }
        assert!(Instant::now() < deadline, "only {ready} of {n} devices ready in time");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn ids(devices: &[Value]) -> Vec<String> {
    devices.iter().map(|d| d["device_id"].as_str().unwrap().to_string()).collect()
}

fn strictly_increasing(ids: &[String]) -> bool {
    ids.windows(2).all(|w| w[0] < w[1])
}

#[tokio::test]
async fn a_fleet_is_listed_a_page_at_a_time_in_every_shape() {
    let hub = HubProcess::start(&[], &[]).await;
    let _fleet = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:20:00", "--count", "25"], &[]);
    wait_ready(&hub, 25).await;

    // --json: one array, whatever the page size; the same devices in the same order.
    let whole = mcpdev(&hub, &["devices", "--json"]).await;
    assert_eq!(whole.code, 0, "{whole:?}");
    let whole = whole.json().as_array().cloned().unwrap();
    let paged = mcpdev(&hub, &["devices", "--json", "--page-size", "4"]).await;
    assert_eq!(paged.code, 0, "{paged:?}");
    let paged_v = paged.json().as_array().cloned().unwrap();
    assert_eq!(ids(&paged_v), ids(&whole));
    assert_eq!(paged_v.len(), 25);
    assert!(strictly_increasing(&ids(&paged_v)), "{:?}", ids(&paged_v));
    assert!(paged_v.iter().all(|d| d["tools"].is_array()), "a device keeps its whole description");
    // One device per line between the brackets, as pages arrive.
    assert_eq!(paged.stdout.lines().count(), 27, "{}", paged.stdout);

    // --ndjson: one object per line, the same devices.
    let nd = mcpdev(&hub, &["devices", "--ndjson", "--page-size", "4"]).await;
    assert_eq!(nd.code, 0, "{nd:?}");
    let lines: Vec<Value> = nd.stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    assert_eq!(ids(&lines), ids(&whole));

    // The table: every device, and the count.
    let table = mcpdev(&hub, &["devices", "--page-size", "3"]).await;
    assert_eq!(table.code, 0, "{table:?}");
    assert!(table.stderr.contains("25 device(s) connected"), "{}", table.stderr);
    for id in ids(&whole) {
        assert!(table.stdout.contains(&id), "{id} missing from the table:\n{}", table.stdout);
    }
    // A page size the hub would not serve is refused by the CLI, saying what is allowed.
    let bad = mcpdev(&hub, &["devices", "--page-size", "0"]).await;
    assert_eq!(bad.code, 2, "{bad:?}");

    // An empty answer is still one JSON array.
    let none = HubProcess::start(&[], &[]).await;
    let empty = mcpdev(&none, &["devices", "--json"]).await;
    assert_eq!(empty.json(), json!([]));
}

#[tokio::test]
async fn the_control_api_pages_within_its_cap_and_keeps_the_unpaged_shape() {
    let hub = HubProcess::start(&[], &[]).await;
    let _fleet = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:30:00", "--count", "5"], &[]);
    wait_ready(&hub, 5).await;
    let client = HubClient::connect(&hub.host_url).await.unwrap();
    // An older client's request: the whole array, as before.
    let all = client.call(json!({"op": "devices"})).await.unwrap();
    assert_eq!(all.as_array().map(Vec::len), Some(5));
    // A client asking for more than the cap gets at most the cap (here, the whole small fleet)
    // and no cursor; one asking for none gets one device and a cursor.
    let big = client.call(json!({"op": "devices", "limit": 1_000_000_000u64})).await.unwrap();
    assert_eq!(big["devices"].as_array().map(Vec::len), Some(5));
    assert_eq!(big["next"], Value::Null);
    let one = client.call(json!({"op": "devices", "limit": 0})).await.unwrap();
    assert_eq!(one["devices"].as_array().map(Vec::len), Some(1));
    assert_eq!(one["next"], one["devices"][0]["device_id"]);
    // A cursor that names no device (made up, or of a device that left) still pages on from there.
    let after = client.call(json!({"op": "devices", "limit": 2, "after": "02:00:00:00:30:01x"})).await.unwrap();
    assert_eq!(ids(after["devices"].as_array().unwrap()), vec!["02:00:00:00:30:02", "02:00:00:00:30:03"]);
    // A hostile cursor (escapes, markup) is only a position (before every MAC): nothing of it is
    // echoed back.
    let odd = client.call(json!({"op": "devices", "limit": 2, "after": "\u{1b}[31m<script>"})).await.unwrap();
    assert_eq!(ids(odd["devices"].as_array().unwrap()), vec!["02:00:00:00:30:00", "02:00:00:00:30:01"]);
    assert!(!odd.to_string().contains("<script>") && !odd.to_string().contains("\\u001b"), "{odd}");
}

#[tokio::test]
async fn a_listing_under_churn_repeats_nobody_and_loses_nobody_who_stayed() {
    let hub = HubProcess::start(&[], &[]).await;
    // 20 devices stay; others, with ids between two groups of theirs, come and go while the listing pages.
    let _stay_a = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:40:00", "--count", "10"], &[]);
    let _stay_b = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:42:00", "--count", "10"], &[]);
    wait_ready(&hub, 20).await;
    let stayed: Vec<String> = (0..10).flat_map(|i| [format!("02:00:00:00:40:{i:02x}"), format!("02:00:00:00:42:{i:02x}")]).collect();
    let churn = tokio::spawn({
        let url = hub.device_url.clone();
        async move {
            for round in 0..40u32 {
                let first = format!("02:00:00:00:41:{:02x}", (round % 4) * 8);
                let mut sim = spawn_mcpdev(&["sim", "--url", &url, "--device-id", &first, "--count", "8"], &[]);
                tokio::time::sleep(Duration::from_millis(150)).await;
                let _ = sim.child.start_kill();
                let _ = sim.child.wait().await;
            }
        }
    });
    let mut listings = 0;
    while !churn.is_finished() {
        let nd = mcpdev(&hub, &["devices", "--ndjson", "--page-size", "3"]).await;
        assert_eq!(nd.code, 0, "{nd:?}");
        let got: Vec<String> = nd.stdout.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["device_id"].as_str().unwrap().to_string()).collect();
        assert!(strictly_increasing(&got), "a device listed twice or out of order: {got:?}");
        for id in &stayed {
            assert!(got.contains(id), "{id} stayed connected but was not listed: {got:?}");
        }
        listings += 1;
    }
    churn.await.unwrap();
    assert!(listings >= 3, "the churn ended before the listing could overlap it ({listings})");
}

/// Issue 46.2: the unpaged `devices` answer an older client reads is streamed (one message in
/// fragments, a part of the fleet at a time), and still comes whole, in Device-Id order, each
/// device once with its whole description; an answer asked for meanwhile on the same connection
/// comes whole too, never inside the listing. `admitted` keeps its shape.
#[tokio::test]
async fn an_unpaged_listing_of_many_devices_comes_whole_and_in_order() {
    const N: usize = 300;
    let hub = HubProcess::start(&[], &[]).await;
    // Ids out of order between two fleets, so order is the hub's doing.
    let _b = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:51:00", "--count", "150"], &[]);
    let _a = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:50:00", "--count", "150"], &[]);
    wait_ready(&hub, N).await;
    let client = HubClient::connect(&hub.host_url).await.unwrap();
    let (all, stats, again) = tokio::join!(
        client.call(json!({"op": "devices"})),
        client.call(json!({"op": "stats"})),
        client.call(json!({"op": "devices"})),
    );
    let (all, again) = (all.unwrap(), again.unwrap());
    assert!(stats.unwrap()["in_flight"].is_u64());
    let all = all.as_array().cloned().expect("the unpaged shape: one array");
    assert_eq!(all.len(), N);
    let listed = ids(&all);
    assert!(strictly_increasing(&listed), "out of order or repeated: {listed:?}");
    let expected: Vec<String> = ["50", "51"].iter().flat_map(|g| (0..150).map(move |i| format!("02:00:00:00:{g}:{i:02x}"))).collect();
    assert_eq!(listed, expected);
    assert!(all.iter().all(|d| d["tools"].as_array().is_some_and(|t| !t.is_empty()) && d["phase"] == "ready"), "each device with its whole description");
    // Several KB a device: the answer spans many fragments.
    assert!(serde_json::to_string(&all).unwrap().len() > 4 * (128 << 10), "too small to need fragments");
    assert_eq!(ids(again.as_array().unwrap()), listed);
    let admitted = client.call(json!({"op": "admitted"})).await.unwrap();
    assert!(admitted["approve_all"].is_boolean() && admitted["devices"].is_array(), "{admitted}");
}
