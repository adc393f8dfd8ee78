//! The hub connection on the chip: waits for DHCP, then runs `hub_link::connect::attempt` (the
//! WebSocket or MQTT session, or an OTA check-in that picks one; all host-tested in that crate)
//! and reconnects with exponential backoff. A reboot asked for by `self.reboot` happens here.

use alloc::string::String;
use alloc::vec;

use edge_nal_embassy::{Dns, Tcp, TcpBuffers};
use embassy_net::Stack;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::{Duration, Timer};
use esp_hal::rng::Rng;
use hub_link::connect::{Buffers, attempt};
use hub_link::tls::{TlsBuffers, Trust};
use hub_link::{Backoff, End, Identity, Timing};
use log::{info, warn};
use mcp_device::DeviceLink;
use provisioning::{HubUrl, loggable_url};
use static_cell::StaticCell;

use crate::status;
use crate::tools::{self, Board};

/// The largest incoming text message (larger WebSocket frames and MQTT packets are skipped).
const RX_BUF_LEN: usize = 8 * 1024;
/// The headers of an HTTP response (the WebSocket upgrade, an OTA answer).
const HTTP_BUF_LEN: usize = 2048;
const TCP_TX_LEN: usize = 4096;
const TCP_RX_LEN: usize = 4096;

/// BOOT-button presses (their running count), from the button task to the connection. Presses
/// made while offline wait here (up to 8).
pub static BUTTON_PRESSES: Channel<CriticalSectionRawMutex, u32, 8> = Channel::new();

fn random() -> u32 {
    Rng::new().random()
}

fn reboot_requested(b: &Board) -> bool {
    b.reboot_requested
}

/// Whether the provisioned URL itself is what cannot be used (TLS without a hub CA); settings
/// from an OTA answer may change, so those are retried.
fn provisioned_url_unusable(hub_url: &str, trust: Option<&Trust>) -> bool {
    HubUrl::parse(hub_url).map_or(true, |u| u.scheme.is_tls() && trust.is_none())
}

/// Connects to the hub and keeps reconnecting, forever.
pub async fn run(stack: Stack<'static>, hub_url: String, id: Identity, trust: Option<Trust>, mut link: DeviceLink<Board>) -> ! {
    let shown = loggable_url(&hub_url);
    static TCP_BUFFERS: StaticCell<TcpBuffers<1, TCP_TX_LEN, TCP_RX_LEN>> = StaticCell::new();
    let tcp = Tcp::new(stack, TCP_BUFFERS.init(TcpBuffers::new()));
    let dns = Dns::new(stack);
    let (mut rx, mut http) = (vec![0u8; RX_BUF_LEN], vec![0u8; HTTP_BUF_LEN]);
    // Allocated by the first TLS handshake (about 21 KB), never without a hub CA.
    let mut tls = TlsBuffers::default();
    let user_agent = alloc::format!("mcpdev-fw-{}/{}", crate::board::NAME, env!("CARGO_PKG_VERSION"));
    let board = hub_link::Board {
        random,
        reboot_requested,
        system_info: tools::system_info_json,
        user_agent: &user_agent,
        presses: &BUTTON_PRESSES,
        trust: trust.as_ref(),
    };
    let timing = Timing::default();
    let mut backoff = Backoff::default();
    loop {
        if !stack.is_config_up() {
            info!("hub: waiting for Wi-Fi and DHCP");
            stack.wait_config_up().await;
        }
        let own = stack.config_v4().map(|c| c.address.address());
        status::set_ipv4(own);
        if let Some(ip) = own {
            info!("hub: own address {ip}, connecting to {shown}");
        }
        let mut greeted = false;
        let mut bufs = Buffers { rx: &mut rx, http: &mut http, tls: &mut tls };
        let end = attempt(&tcp, &dns, &hub_url, &id, &mut link, &board, &timing, &mut bufs, &mut greeted).await;
        match end {
            End::Reboot => {
                info!("hub: rebooting as asked");
                Timer::after(Duration::from_millis(100)).await; // let the log line out
                esp_hal::system::software_reset();
            }
            // Provisioning fixes this, not retrying: say so every minute.
            End::Unusable(why) if provisioned_url_unusable(&hub_url, trust.as_ref()) => crate::park(alloc::format!("hub: {why}")).await,
            _ => {}
        }
        status::set_ipv4(None);
        if greeted {
            warn!("hub: connection ended: {end}");
        } else {
            warn!("hub: connection failed: {end}");
        }
        let delay = backoff.delay(greeted, random());
        info!("hub: reconnecting in {} ms", delay.as_millis());
        Timer::after(delay).await;
    }
}
