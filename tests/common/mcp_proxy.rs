//! A pass-through HTTP proxy in front of an MCP server that notes the JSON-RPC method (and, for
//! `tools/call`, the tool) of every request it forwards: what the server was asked, seen from
//! outside the client.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::Response;
use serde_json::Value;

pub struct Proxy {
    /// `http://127.0.0.1:PORT`: the upstream's paths, proxied.
    pub url: String,
    served: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// Forwards everything to `upstream` (`http://host:port`).
    pub async fn start(upstream: &str) -> Self {
        mcpdev::tls::install_crypto_provider();
        let client = reqwest::Client::builder().tls_certs_only([]).build().unwrap();
        let served: Arc<Mutex<Vec<String>>> = Arc::default();
        let (upstream, noted) = (upstream.to_string(), served.clone());
        let app = Router::new().fallback(move |req: Request| forward(client.clone(), upstream.clone(), noted.clone(), req));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, served }
    }

    /// What the server was asked so far: `tools/list`, `tools/call list_device_tools`, ….
    pub fn served(&self) -> Vec<String> {
        self.served.lock().unwrap().clone()
    }
}

async fn forward(client: reqwest::Client, upstream: String, served: Arc<Mutex<Vec<String>>>, req: Request) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 20).await.unwrap();
    if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
        for m in v.as_array().cloned().unwrap_or_else(|| vec![v]) {
            if let Some(method) = m["method"].as_str() {
                let noted = match m["params"]["name"].as_str() {
                    Some(tool) if method == "tools/call" => format!("{method} {tool}"),
                    _ => method.to_string(),
                };
                served.lock().unwrap().push(noted);
            }
        }
    }
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = client.request(parts.method.clone(), format!("{upstream}{path}")).body(bytes);
    for (k, v) in &parts.headers {
        if !matches!(k.as_str(), "host" | "content-length") {
            out = out.header(k, v);
        }
    }
    let answer = out.send().await.unwrap();
    let mut back = Response::builder().status(answer.status());
    for (k, v) in answer.headers() {
        if !matches!(k.as_str(), "content-length" | "transfer-encoding") {
            back = back.header(k, v);
        }
    }
    back.body(Body::from_stream(answer.bytes_stream())).unwrap()
}
