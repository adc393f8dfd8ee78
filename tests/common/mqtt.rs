//! MQTT helpers: a Mosquitto broker per test (the Debian package, installed by `.ci/test`), and
//! a scripted MQTT device speaking the stock firmware's MQTT protocol through rumqttc.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use mcpdev::mqtt::conn::BrokerUrl;
use mcpdev::mqtt::topics;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use super::ws::DEADLINE;

/// A Mosquitto broker on an ephemeral loopback port, killed when dropped.
pub struct Mosquitto {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<tokio::process::Child>,
    /// Configuration lines beside the listener (authentication, plugins); anonymous when empty.
    auth: String,
    /// More of `mosquitto.conf` (a TLS listener, say).
    extra: String,
}

/// The dynamic-security admin of [`Mosquitto::start_dynsec`] (what `mosquitto_ctrl dynsec init`
/// makes), and the hub logins the docs' set-up adds.
pub const DYNSEC_ADMIN: (&str, &str) = ("admin", "admin-password-0123");
pub const HUB_LOGINS: [(&str, &str); 2] = [("mcpdev-hub-1", "hub-one-password-0123"), ("mcpdev-hub-2", "hub-two-password-0123")];

/// What the hub role of docs/mqtt.md lets a hub subscribe to, beside its cluster's share group:
/// the hubs' own topics, never a device's downlink nor a plain uplink filter.
pub const HUB_FILTERS: [&str; 6] = ["mcpdev/hubs/+", "mcpdev/claims/+", "mcpdev/fwd/+/+", "mcpdev/index/+/+", "mcpdev/rpc/+/+", "mcpdev/admission/+"];

/// The per-cluster hub role of docs/mqtt.md, as `mosquitto_ctrl dynsec` arguments: publishing
/// under `mcpdev/` but never as a device (`mcpdev/up/…`), subscribing to [`HUB_FILTERS`] and to
/// the cluster's own share group (`serve` logs it: `<--mqtt-group>-<tag of the hub secret>`).
pub fn hub_role(role: &str, share_group: &str) -> Vec<Vec<String>> {
    let acl = |kind: &str, topic: &str, allow: &str, priority: &str| ["addRoleACL", role, kind, topic, allow, priority].map(String::from).to_vec();
    let mut v = vec![vec!["createRole".to_string(), role.to_string()]];
    v.push(acl("publishClientSend", "mcpdev/up/#", "deny", "10"));
    v.push(acl("publishClientSend", "mcpdev/#", "allow", "0"));
    v.push(acl("publishClientReceive", "mcpdev/#", "allow", "0"));
    for f in HUB_FILTERS {
        v.push(acl("subscribePattern", f, "allow", "0"));
    }
    v.push(acl("subscribeLiteral", &format!("$share/{share_group}/mcpdev/up/+"), "allow", "0"));
    v
}

/// The share group of the hubs of [`super::HubProcess::cluster`] (the default `--mqtt-group`).
pub fn cluster_share_group() -> String {
    mcpdev::mqtt::cluster_seal::share_group(&super::cluster_secret(), "mcpdev")
}

/// The dynamic-security plugin as Debian installs it.
pub fn dynsec_plugin() -> String {
    for p in ["/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so", "/usr/lib/aarch64-linux-gnu/mosquitto_dynamic_security.so", "/usr/lib/mosquitto_dynamic_security.so"] {
        if std::path::Path::new(p).exists() {
            return p.to_string();
        }
    }
    panic!("mosquitto_dynamic_security.so is not installed: run .ci/test, which installs the Debian package `mosquitto`")
}

fn mosquitto_binary() -> String {
    for p in ["/usr/sbin/mosquitto", "/usr/bin/mosquitto", "/usr/local/sbin/mosquitto"] {
        if std::path::Path::new(p).exists() {
            return p.to_string();
        }
    }
    match std::process::Command::new("mosquitto").arg("-h").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(_) => "mosquitto".to_string(),
        Err(_) => panic!("mosquitto is not installed: run .ci/test, which installs the Debian package `mosquitto`"),
    }
}

impl Mosquitto {
    pub async fn start() -> Self {
        Self::start_with("").await
    }

    /// A broker whose configuration also has `extra` (more listeners, say).
    pub async fn start_with(extra: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut m = Self { port, dir: tempfile::tempdir().unwrap(), child: None, auth: String::new(), extra: extra.to_string() };
        m.run().await;
        m
    }

    /// Mosquitto with the dynamic-security plugin, set up as docs/mqtt.md says: a fresh file
    /// (`mosquitto_ctrl dynsec init`, admin [`DYNSEC_ADMIN`]), no anonymous clients, and the hub
    /// role of the cluster whose hub secret is [`super::CLUSTER_SECRET`] ([`hub_role`]) with the
    /// hub logins of [`HUB_LOGINS`] (made with `mosquitto_ctrl`, as an operator would).
    pub async fn start_dynsec() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dynamic-security.json");
        let auth = format!("allow_anonymous false\nplugin {}\nplugin_opt_config_file {}\n", dynsec_plugin(), file.display());
        let mut m = Self { port, dir, child: None, auth, extra: String::new() };
        m.init_dynsec().await;
        m
    }

    /// Stops the broker, gives it a fresh dynamic-security file (the hub set-up of the docs, no
    /// device), and starts it again on the same port.
    pub async fn init_dynsec(&mut self) {
        self.kill().await;
        let file = self.dir.path().join("dynamic-security.json");
        let _ = std::fs::remove_file(&file);
        let out = tokio::process::Command::new("mosquitto_ctrl").arg("dynsec").arg("init").arg(&file).arg(DYNSEC_ADMIN.0).arg(DYNSEC_ADMIN.1).output().await.expect("mosquitto_ctrl");
        assert!(out.status.success(), "mosquitto_ctrl dynsec init: {out:?}");
        self.run().await;
        for line in hub_role("mcpdev-hub", &cluster_share_group()) {
            self.ctrl(&line.iter().map(String::as_str).collect::<Vec<_>>()).await;
        }
        for (user, password) in HUB_LOGINS {
            self.ctrl(&["createClient", user, "-p", password]).await;
            self.ctrl(&["addClientRole", user, "mcpdev-hub"]).await;
        }
    }

    /// Mosquitto with a password file and the ACL file docs/cluster.md gives (`users`: name and
    /// password each).
    pub async fn start_acl_file(users: &[(&str, &str)], acl: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let passwd = dir.path().join("passwd");
        std::fs::write(&passwd, "").unwrap();
        for (user, password) in users {
            let out = tokio::process::Command::new("mosquitto_passwd").arg("-b").arg(&passwd).arg(user).arg(password).output().await.expect("mosquitto_passwd");
            assert!(out.status.success(), "mosquitto_passwd: {out:?}");
        }
        let acl_file = dir.path().join("acl");
        std::fs::write(&acl_file, acl).unwrap();
        let auth = format!("allow_anonymous false\npassword_file {}\nacl_file {}\n", passwd.display(), acl_file.display());
        let mut m = Self { port, dir, child: None, auth, extra: String::new() };
        m.run().await;
        m
    }

    /// `mosquitto_ctrl -u admin … dynsec ARGS` against this broker; asserts it worked.
    pub async fn ctrl(&self, args: &[&str]) {
        let port = self.port.to_string();
        let out = tokio::process::Command::new("mosquitto_ctrl")
            .args(["-h", "127.0.0.1", "-p", &port, "-u", DYNSEC_ADMIN.0, "-P", DYNSEC_ADMIN.1, "dynsec"])
            .args(args)
            .output()
            .await
            .expect("mosquitto_ctrl");
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && !said.contains("Error"), "mosquitto_ctrl dynsec {args:?}: {out:?}");
    }

    /// The broker URL with a login.
    pub fn url_as(&self, user: &str) -> String {
        format!("mqtt://{user}@127.0.0.1:{}", self.port)
    }

    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// Starts the broker (again, on the same port) and waits for its "running" log line.
    pub async fn run(&mut self) {
        let conf = self.dir.path().join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!(
                "listener {} 127.0.0.1\n{}persistence false\nlog_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\nlog_type information\n{}",
                self.port,
                if self.auth.is_empty() { "allow_anonymous true\n" } else { &self.auth },
                self.extra,
            ),
        )
        .unwrap();
        let mut child = tokio::process::Command::new(mosquitto_binary())
            .arg("-c")
            .arg(&conf)
            // Its log goes to stderr, which is not buffered (stdout is, when piped).
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start mosquitto");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let running = async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("Error") {
                    panic!("mosquitto: {line}");
                }
                if line.contains(" running") {
                    return;
                }
            }
            panic!("mosquitto exited before it was running");
        };
        tokio::time::timeout(DEADLINE, running).await.expect("mosquitto did not start in time");
        // Keep reading its log so the pipe never fills.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.child = Some(child);
    }

    /// Kills the broker (as a crash would) and waits until it is gone.
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().await.unwrap();
        }
    }
}

/// What a scripted device received, by kind (`server_hello`, `goodbye`, and each MCP method).
#[derive(Debug, Default, Clone)]
pub struct Counts(pub Arc<Mutex<HashMap<String, usize>>>);

impl Counts {
    pub fn get(&self, k: &str) -> usize {
        self.0.lock().unwrap().get(k).copied().unwrap_or(0)
    }

    fn add(&self, k: &str) {
        *self.0.lock().unwrap().entry(k.to_string()).or_default() += 1;
    }
}

/// A device on the broker, as stock firmware speaks (plus its own SUBSCRIBE, which Mosquitto needs).
pub struct MqttDevice {
    pub key: String,
    pub client: rumqttc::AsyncClient,
    pub rx: mpsc::Receiver<Value>,
    pub session_id: String,
    /// What it received, counted from the start.
    pub counts: Counts,
    /// Its connection's task: aborting it drops the socket with no DISCONNECT, as `kill -9` or a
    /// power cut would.
    connection: tokio::task::AbortHandle,
}

impl MqttDevice {
    /// Connects (and reconnects after broker outages, subscribing again) as `device_id`.
    pub async fn connect(broker: &str, device_id: &str) -> Self {
        Self::connect_to(&BrokerUrl::parse(broker).unwrap(), &topics::key_for(device_id).unwrap()).await
    }

    /// Connects to `url` (with its login, if any) with `key` as the client id. The device runs
    /// its own event loop (reconnecting and subscribing again after errors), so that killing it
    /// closes its socket at once.
    pub async fn connect_to(url: &BrokerUrl, key: &str) -> Self {
        let key = key.to_string();
        let (client, mut eventloop) = rumqttc::AsyncClient::new(url.options(&key, std::time::Duration::from_secs(30), 1 << 20), 256);
        let mut network = rumqttc::NetworkOptions::new();
        network.set_tcp_nodelay(true);
        eventloop.set_network_options(network);
        let down = topics::downlink(&key);
        let (tx, rx) = mpsc::channel(256);
        let (up_tx, mut up_rx) = mpsc::channel(4);
        let sub_client = client.clone();
        let task = tokio::spawn(async move {
            loop {
                match eventloop.poll().await {
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(_))) => {
                        sub_client.try_subscribe(down.clone(), rumqttc::QoS::AtMostOnce).unwrap();
                        let _ = up_tx.try_send(());
                    }
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::Publish(p))) if p.topic == down => {
                        let v: Value = serde_json::from_slice(&p.payload).unwrap_or(Value::Null);
                        if tx.send(v).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
                }
            }
        });
        tokio::time::timeout(DEADLINE, up_rx.recv()).await.expect("device did not reach the broker in time");
        Self { key, client, rx, session_id: String::new(), counts: Counts::default(), connection: task.abort_handle() }
    }

    /// What kills the device later (after [`Self::respond_forever`] took it): see [`Self::kill`].
    pub fn killer(&self) -> Killer {
        Killer(self.connection.clone())
    }

    pub async fn send(&self, v: Value) {
        self.client.publish(topics::uplink(&self.key), rumqttc::QoS::AtMostOnce, false, v.to_string()).await.unwrap();
    }

    pub async fn recv(&mut self) -> Value {
        tokio::time::timeout(DEADLINE, self.rx.recv()).await.expect("nothing from the hub in time").expect("device closed")
    }

    /// The next MCP request with this method (other messages skipped); its payload.
    pub async fn recv_request(&mut self, method: &str) -> Value {
        loop {
            let m = self.recv().await;
            if m["type"] == "mcp" && m["payload"]["method"] == method && m["payload"].get("id").is_some() {
                return m["payload"].clone();
            }
        }
    }

    /// Says hello (MQTT form, version 3) and returns the server hello.
    pub async fn hello(&mut self) -> Value {
        self.send(json!({"type":"hello","version":3,"transport":"udp","features":{"mcp":true,"glyph_push":false},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}})).await;
        loop {
            let m = self.recv().await;
            if m["type"] == "hello" {
                self.counts.add("server_hello");
                self.session_id = m["session_id"].as_str().unwrap_or_default().to_string();
                return m;
            }
        }
    }

    pub async fn reply(&self, id: &Value, result: Value) {
        self.send(json!({"session_id": self.session_id, "type":"mcp","payload":{"jsonrpc":"2.0","id":id,"result":result}})).await;
    }

    /// Answers initialize and tools/list with `tools`.
    pub async fn onboard(&mut self, tools: Vec<Value>) {
        let init = self.recv_request("initialize").await;
        self.reply(&init["id"], json!({"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"fake-mqtt","version":"1"}})).await;
        let list = self.recv_request("tools/list").await;
        self.reply(&list["id"], json!({"tools": tools})).await;
    }

    /// From now on answers every request by itself (`tools/call` with `"ok"`) and counts what
    /// it receives.
    pub fn respond_forever(mut self, tools: Vec<Value>) -> Counts {
        let counts = self.counts.clone();
        let c = counts.clone();
        tokio::spawn(async move {
            while let Some(m) = self.rx.recv().await {
                match m["type"].as_str() {
                    Some("hello") => {
                        c.add("server_hello");
                        self.session_id = m["session_id"].as_str().unwrap_or_default().to_string();
                    }
                    Some("mcp") => {
                        let p = &m["payload"];
                        let Some(method) = p["method"].as_str() else { continue };
                        c.add(method);
                        let result = match method {
                            "initialize" => json!({"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"fake-mqtt","version":"1"}}),
                            "tools/list" => json!({"tools": tools}),
                            "tools/call" => json!({"content":[{"type":"text","text":"ok"}],"isError":false}),
                            _ => continue,
                        };
                        if p.get("id").is_some() {
                            self.reply(&p["id"], result).await;
                        }
                    }
                    Some(other) => c.add(other),
                    None => {}
                }
            }
        });
        counts
    }
}

/// Kills a scripted device's connection: no DISCONNECT, the socket just closes.
pub struct Killer(tokio::task::AbortHandle);

impl Killer {
    /// Ends the connection now, as `kill -9` would (the kernel closes the socket).
    pub fn kill(self) {
        self.0.abort();
    }
}

/// One MQTT connection with a given login, as an impostor or a device would make it, that does
/// not reconnect: it tells when the broker ends it.
pub struct Session {
    pub client: rumqttc::AsyncClient,
    /// What the broker sent (publishes, and SUBACK return codes as `{"suback": [...]}`).
    pub rx: mpsc::Receiver<Value>,
    /// Told (with why) when the connection ends.
    pub ended: tokio::sync::watch::Receiver<Option<String>>,
}

/// Connects once as `client_id` with `login` (username, password); `Err` with the broker's
/// refusal (CONNACK code) or the connection error.
pub async fn connect_once(port: u16, client_id: &str, login: Option<(&str, &str)>) -> Result<Session, String> {
    let mut o = rumqttc::MqttOptions::new(client_id, "127.0.0.1", port);
    o.set_keep_alive(std::time::Duration::from_secs(30));
    if let Some((u, p)) = login {
        o.set_credentials(u, p);
    }
    let (client, mut eventloop) = rumqttc::AsyncClient::new(o, 64);
    let first = tokio::time::timeout(DEADLINE, async {
        loop {
            match eventloop.poll().await {
                Ok(rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(_))) => return Ok(()),
                Ok(_) => continue,
                Err(e) => return Err(format!("{e:?}")),
            }
        }
    })
    .await
    .expect("no CONNACK in time");
    first?;
    let (tx, rx) = mpsc::channel(256);
    let (ended_tx, ended) = tokio::sync::watch::channel(None);
    tokio::spawn(async move {
        loop {
            match eventloop.poll().await {
                Ok(rumqttc::Event::Incoming(rumqttc::Packet::Publish(p))) => {
                    let v = json!({"topic": p.topic, "payload": String::from_utf8_lossy(&p.payload)});
                    let _ = tx.send(v).await;
                }
                Ok(rumqttc::Event::Incoming(rumqttc::Packet::SubAck(a))) => {
                    let codes: Vec<String> = a.return_codes.iter().map(|c| format!("{c:?}")).collect();
                    let _ = tx.send(json!({"suback": codes})).await;
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = ended_tx.send(Some(format!("{e:?}")));
                    return;
                }
            }
        }
    });
    Ok(Session { client, rx, ended })
}

impl Session {
    /// The next thing the broker sent, within the deadline.
    pub async fn recv(&mut self) -> Value {
        tokio::time::timeout(DEADLINE, self.rx.recv()).await.expect("nothing from the broker in time").expect("connection gone")
    }

    /// Waits until the broker ends the connection; why.
    pub async fn wait_ended(&mut self) -> String {
        let why = tokio::time::timeout(DEADLINE, self.ended.wait_for(Option::is_some)).await.expect("the broker did not end the session in time").expect("watch closed");
        why.clone().unwrap_or_default()
    }

    /// Subscribes to `filter`; the SUBACK's return code (`Success(AtMostOnce)` or `Failure`).
    pub async fn subscribe(&mut self, filter: &str) -> String {
        self.client.subscribe(filter, rumqttc::QoS::AtMostOnce).await.unwrap();
        loop {
            let v = self.recv().await;
            if let Some(codes) = v.get("suback") {
                return codes[0].as_str().unwrap_or_default().to_string();
            }
        }
    }
}
