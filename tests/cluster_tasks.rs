//! MCP tasks across a cluster (issue 35), with real processes: Mosquitto and two `mcpdev serve`
//! on it. A host creates a task on hub A through `/mcp` for a device A serves, then reaches it
//! through hub B in a new session: `tasks/get`, `tasks/result` (which waits on A) and
//! `tasks/cancel` (which reaches the device) are answered by A, through B. Beside each, its
//! adversary: another requestor asking B for A's task id (the answer for an unknown id), ids with
//! junk in their hub part (refused with no broker traffic), a broker client that is not a hub
//! forging the forwarded request, a local control client claiming an owner, a host that closes
//! its wait, hub A killed while B waits on `tasks/result` (a typed error at once, never "unknown
//! task"), and a task that outlasts the asking hub's wait (said to be still working).

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::fake_device::{FakeDevice, tool};
use common::mcp_session::{Session, without_id};
use common::mqtt::Mosquitto;
use common::ws::DEADLINE;
use common::{HubProcess, mcpdev};
use futures_util::{SinkExt, StreamExt};
use mcpdev::mqtt::conn::{self, BrokerUrl, ConnEvent};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const DEVICE: &str = "02:00:00:00:00:0c";
const CAMERA: &str = "dev-02000000000c.camera.take";

struct Cluster {
    broker: Mosquitto,
    hubs: Vec<HubProcess>,
    dirs: Vec<tempfile::TempDir>,
    /// Hub A's cluster id.
    a: String,
    b: String,
    device: FakeDevice,
}

/// Two hubs on one Mosquitto (hub A's `--mcp-timeout` 30 s, hub B's `b_timeout` s); a camera on
/// hub A; back once hub B lists it (so B knows A is live).
async fn two_hubs(b_timeout: &str) -> Cluster {
    let broker = Mosquitto::start().await;
    let url = broker.url();
    let (hubs, dirs) = HubProcess::cluster_of(&[&["--mqtt", &url, "--mcp-timeout", "30"], &["--mqtt", &url, "--mcp-timeout", b_timeout]], false).await;
    let device = FakeDevice::connect(&hubs[0].device_url, DEVICE, vec![tool("camera.take")]).await;
    let a = hubs[0].info["hub_id"].as_str().unwrap().to_string();
    let b = hubs[1].info["hub_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let out = mcpdev(&hubs[1], &["devices", "--json"]).await;
        let listed: Vec<Value> = serde_json::from_str(&out.stdout).unwrap_or_default();
        if listed.iter().any(|d| d["device_id"] == DEVICE && d["hub"] == a.as_str() && d["phase"] == "ready") {
            break;
        }
        assert!(Instant::now() < deadline, "hub B never listed hub A's device: {out:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Cluster { broker, hubs, dirs, a, b, device }
}

/// Every hub-to-hub `task` request, and every cancel of a request, on the broker (its text
/// after the MAC), in the order sent; back once the subscription holds.
async fn task_requests(broker: &Mosquitto) -> mpsc::UnboundedReceiver<Value> {
    let url = BrokerUrl::parse(&broker.url()).unwrap();
    let mut c = conn::connect(url.options("observer", Duration::from_secs(30), 1 << 20), None);
    loop {
        match tokio::time::timeout(DEADLINE, c.events.recv()).await.expect("the observer's subscription").unwrap() {
            ConnEvent::Up => c.client.subscribe("mcpdev/rpc/+/q", rumqttc::QoS::AtMostOnce).await.unwrap(),
            ConnEvent::Subscribed => break,
            _ => {}
        }
    }
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let _client = c.client;
        while let Some(ev) = c.events.recv().await {
            if let ConnEvent::Message(p) = ev {
                let text = String::from_utf8_lossy(&p.payload).into_owned();
                let body = text.split_once('\n').map_or(text.as_str(), |(_, b)| b);
                if let Ok(v) = serde_json::from_str::<Value>(body)
                    && (v["op"]["op"] == "task" || v["cancel"] == true)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        }
    });
    rx
}

async fn next_task_request(seen: &mut mpsc::UnboundedReceiver<Value>) -> Value {
    tokio::time::timeout(DEADLINE, seen.recv()).await.expect("a task request on the broker").unwrap()
}

/// The messages of an event-stream response, in order.
async fn events(resp: reqwest::Response) -> Vec<Value> {
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"), "{resp:?}");
    let text = tokio::time::timeout(DEADLINE, resp.text()).await.expect("no answer in time").unwrap();
    text.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| serde_json::from_str(d.trim()).unwrap()).collect()
}

fn not_found(answer: &Value) -> bool {
    answer["error"]["code"] == -32602 && answer["error"]["message"].as_str().is_some_and(|m| m.starts_with("Failed to retrieve task: Task not found"))
}

#[tokio::test]
async fn a_task_held_by_hub_a_is_reached_through_hub_b_by_its_owner_and_by_nobody_else() {
    let mut c = two_hubs("30").await;
    let mut seen = task_requests(&c.broker).await;
    let (mut on_a, _) = Session::open(&c.hubs[0], "/mcp", "127.0.0.1").await;
    let task = on_a.task(CAMERA, 60_000).await;
    let id = task["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with(&format!("{}/", c.a)), "{id} should name hub A ({})", c.a);
    let call = c.device.recv_request("tools/call").await;

    // The host comes back through hub B, in a new session: B asks A, with the host's owner.
    let (mut on_b, _) = Session::open(&c.hubs[1], "/mcp", "127.0.0.1").await;
    let got = on_b.ask("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["taskId"], id.as_str(), "{got}");
    assert_eq!(got["result"]["status"], "working", "{got}");
    let asked = next_task_request(&mut seen).await;
    assert_eq!((asked["from"].as_str(), asked["op"]["method"].as_str(), asked["op"]["owner"].as_str()), (Some(c.b.as_str()), Some("tasks/get"), Some("127.0.0.1")), "{asked}");

    // The adversary on B: another requestor holding A's id learns what a guessed id tells.
    let (mut stranger, _) = Session::open(&c.hubs[1], "/mcp", "127.0.0.2").await;
    let guessed = format!("{}/{}", c.a, "0".repeat(32));
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let theirs = stranger.ask(method, json!({"taskId": id})).await;
        let unknown = stranger.ask(method, json!({"taskId": guessed})).await;
        assert!(not_found(&theirs), "{method}: {theirs}");
        assert_eq!(without_id(&theirs["error"], &id), without_id(&unknown["error"], &guessed), "{method}");
        // Both went to A, which made the owner check, as the stranger's own address.
        for _ in 0..2 {
            assert_eq!(next_task_request(&mut seen).await["op"]["owner"], "127.0.0.2");
        }
    }
    assert_eq!(stranger.ask("tasks/list", json!({})).await["result"]["tasks"], json!([]));

    // tasks/result through B waits on A until the device answers; the answer is the call's own,
    // after the task's status, on the request's own stream.
    let mut waiter = on_b.again(100);
    let id2 = id.clone();
    let waiting = tokio::spawn(async move { events(waiter.post("tasks/result", json!({"taskId": id2})).await).await });
    assert_eq!(next_task_request(&mut seen).await["op"]["method"], "tasks/result");
    c.device.reply(&call["id"], json!({"content": [{"type": "text", "text": "a photo"}], "isError": false})).await;
    let streamed = tokio::time::timeout(DEADLINE, waiting).await.expect("tasks/result through B never ended").unwrap();
    assert_eq!(streamed.len(), 2, "{streamed:?}");
    let (note, result) = (&streamed[0], &streamed[1]);
    assert_eq!((note["method"].as_str(), note["params"]["taskId"].as_str(), note["params"]["status"].as_str()), (Some("notifications/tasks/status"), Some(id.as_str()), Some("completed")), "{note}");
    assert_eq!(result["result"]["content"][0]["text"], "a photo", "{result}");
    assert_eq!(result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
    assert_eq!(on_b.ask("tasks/get", json!({"taskId": id})).await["result"]["status"], "completed");

    // tasks/cancel through B stops the call on A, and the device hears of it.
    let second = on_a.task(CAMERA, 60_000).await["taskId"].as_str().unwrap().to_string();
    let call = c.device.recv_request("tools/call").await;
    let cancelled = on_b.ask("tasks/cancel", json!({"taskId": second})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let note = loop {
        let m = c.device.recv().await;
        if m["payload"]["method"] == "notifications/cancelled" {
            break m["payload"].clone();
        }
    };
    assert_eq!(note["params"]["requestId"], call["id"], "{note}");
    assert_eq!(on_a.ask("tasks/get", json!({"taskId": second})).await["result"]["status"], "cancelled");
    let again = on_b.ask("tasks/cancel", json!({"taskId": second})).await;
    assert!(again["error"]["message"].as_str().unwrap().contains("terminal status 'cancelled'"), "{again}");

    // tasks/list is the asked hub's own: B holds none; a cursor from A's list is said to be A's.
    assert_eq!(on_b.ask("tasks/list", json!({})).await["result"]["tasks"], json!([]));
    let on_a_list = on_a.ask("tasks/list", json!({})).await;
    assert_eq!(on_a_list["result"]["tasks"].as_array().unwrap().len(), 2, "{on_a_list}");
    let foreign_cursor = on_b.ask("tasks/list", json!({"cursor": id})).await;
    assert_eq!(foreign_cursor["error"]["code"], -32602);
    assert!(foreign_cursor["error"]["message"].as_str().unwrap().contains(&format!("hub {}'s list", c.a)), "{foreign_cursor}");

    // Junk in the hub part, or a hub that is not in the cluster: unknown, and nothing is sent.
    while seen.try_recv().is_ok() {}
    let hex = "0".repeat(32);
    let junk = [
        format!("{}/x/{hex}", c.a),
        format!("{}/../{hex}", c.a),
        format!("{}\u{1b}[2J/{hex}", c.a),
        format!("{}/{hex}", "a".repeat(100_000)),
        format!("{}+/{hex}", c.a),
        format!("{}/{hex}{hex}", c.a),
        format!("0123456789ab/{hex}"),
        format!("{}/{hex}", c.b),
    ];
    for bad in &junk {
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let answer = on_b.ask(method, json!({"taskId": bad})).await;
            assert!(not_found(&answer), "{method} {:?}: {answer}", &bad[..bad.len().min(60)]);
        }
    }
    // One real request after them: the first task request the broker carries since is it.
    assert!(not_found(&on_b.ask("tasks/get", json!({"taskId": guessed})).await));
    let first = next_task_request(&mut seen).await;
    assert_eq!(first["op"]["task"], guessed.as_str(), "a junk id reached the broker: {first}");
}

/// The adversary on the broker: a client that is not a hub forges the request hub B would send
/// A for its host (a `tasks/cancel` in the owner's name). Unsigned, signed under a name that is
/// not a live hub, or in a live hub's name without the secret's MAC: dropped, the task runs on.
/// A local control client cannot send the op either (it could claim any owner). A hub's own
/// request (signed) still meets the owner check on A.
#[tokio::test]
async fn a_forged_task_request_is_dropped_and_the_op_is_served_only_for_hubs() {
    let mut c = two_hubs("30").await;
    let (mut on_a, _) = Session::open(&c.hubs[0], "/mcp", "127.0.0.1").await;
    let id = on_a.task(CAMERA, 60_000).await["taskId"].as_str().unwrap().to_string();
    c.device.recv_request("tools/call").await;
    let secret = mcpdev::hub::secret::HubSecret::load_or_create(&c.dirs[0].path().join("hub-secret")).unwrap();
    let seal = |v: &Value| format!("{}\n{v}", secret.mac(mcpdev::hub::secret::Purpose::ClusterRpc, v.to_string().as_bytes()));
    let url = BrokerUrl::parse(&c.broker.url()).unwrap();
    let mut intruder = conn::connect(url.options("intruder", Duration::from_secs(30), 1 << 20), None);
    loop {
        match tokio::time::timeout(DEADLINE, intruder.events.recv()).await.expect("the intruder's subscription").unwrap() {
            ConnEvent::Up => intruder.client.subscribe(format!("mcpdev/rpc/{}/a", c.b), rumqttc::QoS::AtMostOnce).await.unwrap(),
            ConnEvent::Subscribed => break,
            _ => {}
        }
    }
    let to_a = format!("mcpdev/rpc/{}/q", c.a);
    let op = |method: &str, owner: &str| json!({"op": "task", "method": method, "task": id, "owner": owner, "wait_ms": 1000});
    let cancel = op("tasks/cancel", "127.0.0.1");
    let forged = json!({"c": 1u64 << 40, "from": "intruder", "op": cancel});
    let in_bs_name = json!({"c": (1u64 << 40) + 1, "from": c.b, "op": cancel});
    for payload in [forged.to_string(), seal(&forged), in_bs_name.to_string(), format!("{}\n{in_bs_name}", "00".repeat(32))] {
        intruder.client.publish(&to_a, rumqttc::QoS::AtMostOnce, false, payload).await.unwrap();
    }
    // A request signed with the secret, after them: its answer says the task still works (A took
    // the messages in order, so the forged ones were dropped, not yet to come).
    let mut ask = async |n: u64, op: Value| -> Value {
        let c_n = (1u64 << 41) + n;
        intruder.client.publish(&to_a, rumqttc::QoS::AtMostOnce, false, seal(&json!({"c": c_n, "from": c.b, "op": op}))).await.unwrap();
        loop {
            if let ConnEvent::Message(p) = tokio::time::timeout(DEADLINE, intruder.events.recv()).await.expect("hub A's answer").unwrap() {
                let text = String::from_utf8_lossy(&p.payload).into_owned();
                let v: Value = serde_json::from_str(text.split_once('\n').unwrap().1).unwrap();
                if v["id"] == c_n {
                    return v;
                }
            }
        }
    };
    let got = ask(1, op("tasks/get", "127.0.0.1")).await;
    assert_eq!(got["ok"]["result"]["status"], "working", "a forged cancel was taken: {got}");
    // Signed, but for another owner: the owner check holds on A, whoever forwards.
    let other = ask(2, op("tasks/cancel", "127.0.0.2")).await;
    assert_eq!(other["ok"]["error"]["code"], -32602, "{other}");
    // A local control client (the hub's own user, or a remote token's holder) cannot claim an owner.
    let port = c.hubs[0].host_url.rsplit(':').next().unwrap();
    let token = mcpdev::links::control_token::token_of(&std::fs::read(PathBuf::from(&c.hubs[0].runtime_dir).join(format!("control-{port}.token"))).unwrap());
    let mut req = format!("{}/api/v1/link", c.hubs[0].host_url.replace("http://", "ws://")).into_client_request().unwrap();
    req.headers_mut().insert("Authorization", format!("Bearer {token}").parse().unwrap());
    let (mut link, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut local = cancel.clone();
    local["id"] = json!(7);
    link.send(Message::text(local.to_string())).await.unwrap();
    let answer: Value = serde_json::from_str(tokio::time::timeout(DEADLINE, link.next()).await.unwrap().unwrap().unwrap().to_text().unwrap()).unwrap();
    assert_eq!(answer["error"]["kind"], "bad_request", "{answer}");
    assert_eq!(on_a.ask("tasks/get", json!({"taskId": id})).await["result"]["status"], "working");
    // The op itself works for a hub: the same cancel, signed, in B's name, ends the task.
    let done = ask(3, cancel.clone()).await;
    assert_eq!(done["ok"]["result"]["status"], "cancelled", "{done}");
}

/// A host that closes its `tasks/result` on hub B: B cancels its request on A. Then hub A is
/// killed (`kill -9`) while hub B waits on A for a task's result: B answers at once with a typed
/// error that names A (not "unknown task", not after the call's 30 s timeout); the id, naming a
/// hub no longer in the cluster, is then unknown.
#[tokio::test]
async fn a_closed_wait_is_cancelled_on_a_and_hub_a_killed_while_b_waits_ends_the_wait_with_a_typed_error() {
    let mut c = two_hubs("30").await;
    let mut seen = task_requests(&c.broker).await;
    let (mut on_a, _) = Session::open(&c.hubs[0], "/mcp", "127.0.0.1").await;
    let id = on_a.task(CAMERA, 60_000).await["taskId"].as_str().unwrap().to_string();
    c.device.recv_request("tools/call").await;
    let (mut on_b, _) = Session::open(&c.hubs[1], "/mcp", "127.0.0.1").await;
    // A host that gives up its tasks/result (closes the request): B cancels its request on A, so
    // neither hub keeps a slot for an answer nobody reads.
    let mut quitter = on_b.again(50);
    let id2 = id.clone();
    let quitting = tokio::spawn(async move { quitter.ask("tasks/result", json!({"taskId": id2})).await });
    let asked = next_task_request(&mut seen).await;
    assert_eq!(asked["op"]["method"], "tasks/result");
    quitting.abort();
    let cancel = next_task_request(&mut seen).await;
    assert_eq!((cancel["c"].as_u64(), cancel["cancel"].as_bool()), (asked["c"].as_u64(), Some(true)), "{cancel}");

    let mut waiter = on_b.again(100);
    let id2 = id.clone();
    let waiting = tokio::spawn(async move { waiter.ask("tasks/result", json!({"taskId": id2})).await });
    assert_eq!(next_task_request(&mut seen).await["op"]["method"], "tasks/result");
    c.hubs[0].running.child.kill().await.unwrap();
    let killed = Instant::now();
    let answer = tokio::time::timeout(DEADLINE, waiting).await.expect("B still waits on a dead hub").unwrap();
    assert!(killed.elapsed() < Duration::from_secs(10), "ended by the hub's death, not by the call's timeout: {:?}", killed.elapsed());
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert_eq!((answer["error"]["data"]["kind"].as_str(), answer["error"]["data"]["hub"].as_str()), (Some("link_down"), Some(c.a.as_str())), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("held by hub {}, which did not answer", c.a)) && message.contains("left the cluster"), "{message}");
    assert!(not_found(&on_b.ask("tasks/get", json!({"taskId": id})).await));
}

/// The asking hub waits on a task's result for its own `--mcp-timeout` and the hop: when the hub
/// that holds the task lets its call run longer (hub B 1 s, hub A 30 s), B's `tasks/result` ends
/// in time with an error that says the task still works, and asking again later gets the result.
#[tokio::test]
async fn a_result_that_outlasts_the_asking_hubs_wait_is_said_to_be_still_working_and_asked_again() {
    let mut c = two_hubs("1").await;
    let (mut on_a, _) = Session::open(&c.hubs[0], "/mcp", "127.0.0.1").await;
    let id = on_a.task(CAMERA, 60_000).await["taskId"].as_str().unwrap().to_string();
    let call = c.device.recv_request("tools/call").await;
    let (mut on_b, _) = Session::open(&c.hubs[1], "/mcp", "127.0.0.1").await;
    let asked = Instant::now();
    let early = on_b.ask("tasks/result", json!({"taskId": id})).await;
    // After B's 1 s and its call grace (2 s), A answers; well before A's own 30 s call ends.
    assert!(asked.elapsed() < Duration::from_secs(20), "ended by A's call, not by B's wait: {:?}", asked.elapsed());
    assert_eq!((early["error"]["code"].as_i64(), early["error"]["data"]["kind"].as_str()), (Some(-32000), Some("timeout")), "{early}");
    assert!(early["error"]["message"].as_str().unwrap().contains("still working"), "{early}");
    assert_eq!(on_b.ask("tasks/get", json!({"taskId": id})).await["result"]["status"], "working");
    c.device.reply(&call["id"], json!({"content": [{"type": "text", "text": "late"}]})).await;
    let result = on_b.ask("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["result"]["content"][0]["text"], "late", "{result}");
}
