//! A TCP relay to a local server (the broker) whose connections a test cuts at will: the client
//! behind it (a hub) loses the server at once, and the server sees the client's socket close
//! (Mosquitto publishes its last will). While closed, the relay takes connections and ends them,
//! so the client keeps retrying until [`Relay::open`].

use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Relay {
    pub port: u16,
    conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    open: watch::Sender<bool>,
}

impl Relay {
    /// Relays `127.0.0.1:<port>` (its own) to `127.0.0.1:<to>`, open.
    pub async fn start(to: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (open, is_open) = watch::channel(true);
        let held = conns.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !*is_open.borrow() {
                    continue; // dropped: the client sees its connection end
                }
                let Ok(mut server) = TcpStream::connect(("127.0.0.1", to)).await else { continue };
                let task = tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
                held.lock().unwrap().push(task.abort_handle());
            }
        });
        Self { port, conns, open }
    }

    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// Ends every relayed connection (both sockets close) and refuses new ones until [`Self::open`].
    pub fn cut(&self) {
        self.open.send_replace(false);
        for task in self.conns.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    pub fn open(&self) {
        self.open.send_replace(true);
    }
}
