//! A raw Streamable HTTP MCP session to one of the hub's endpoints, from a chosen loopback
//! address (another requestor on this machine), that shows exactly what the hub answered.

use serde_json::{Value, json};

use super::HubProcess;
use super::ws::DEADLINE;

pub const ACCEPT: &str = "application/json, text/event-stream";

pub struct Session {
    pub http: reqwest::Client,
    pub url: String,
    pub id: String,
    pub next: u64,
}

impl Session {
    /// A session on `path` from `from` (a loopback address).
    pub async fn open(hub: &HubProcess, path: &str, from: &str) -> (Self, Value) {
        mcpdev::tls::install_crypto_provider();
        let http = reqwest::Client::builder().local_address(from.parse::<std::net::IpAddr>().unwrap()).build().unwrap();
        let url = format!("{}{path}", hub.host_url);
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}});
        let resp = http.post(&url).header("accept", ACCEPT).json(&init).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let id = resp.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let init = message(resp).await;
        let session = Self { http, url, id, next: 1 };
        session.http.post(&session.url).header("accept", ACCEPT).header("mcp-session-id", &session.id).json(&json!({"jsonrpc":"2.0","method":"notifications/initialized"})).send().await.unwrap();
        (session, init)
    }

    /// Another handle on the same session (for a request that waits while this one goes on).
    pub fn again(&self, next: u64) -> Self {
        Self { http: self.http.clone(), url: self.url.clone(), id: self.id.clone(), next }
    }

    pub async fn ask(&mut self, method: &str, params: Value) -> Value {
        message(self.post(method, params).await).await
    }

    /// The raw response to a request (to read its stream).
    pub async fn post(&mut self, method: &str, params: Value) -> reqwest::Response {
        self.next += 1;
        let body = json!({"jsonrpc":"2.0","id":self.next,"method":method,"params":params});
        self.http.post(&self.url).header("accept", ACCEPT).header("mcp-session-id", &self.id).json(&body).send().await.unwrap()
    }

    /// A task-augmented call of `name`; the task the hub answered.
    pub async fn task(&mut self, name: &str, ttl: u64) -> Value {
        let created = self.ask("tools/call", json!({"name": name, "arguments": {"n": 1}, "task": {"ttl": ttl}})).await;
        created["result"]["task"].clone()
    }
}

/// The JSON-RPC answer in a response (a JSON body, or the SSE event with an id).
pub async fn message(resp: reqwest::Response) -> Value {
    let sse = resp.headers().get("content-type").is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
    let text = tokio::time::timeout(DEADLINE, resp.text()).await.expect("no answer in time").unwrap();
    if sse {
        text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok()).find(|m| m.get("id").is_some()).unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&text).unwrap()
    }
}

/// An error with its task id taken out, to compare two answers for different ids.
pub fn without_id(error: &Value, id: &str) -> String {
    error.to_string().replace(id, "<id>")
}
