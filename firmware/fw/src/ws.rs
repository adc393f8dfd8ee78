//! The hub connection on the chip: waits for DHCP, resolves the hub with embassy-net's DNS, runs
//! `hub_link::session` (the WebSocket, hello, MCP and keepalive, host-tested in that crate) and
//! reconnects with exponential backoff. A reboot asked for by `self.reboot` happens here.

use alloc::string::String;
use alloc::vec;
use core::net::{IpAddr, SocketAddr};

use edge_nal_embassy::{Tcp, TcpBuffers};
use embassy_net::Stack;
use embassy_net::dns::DnsQueryType;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::{Duration, Timer, with_timeout};
use esp_hal::rng::Rng;
use hub_link::{Backoff, End, Identity, Timing};
use log::{info, warn};
use mcp_device::DeviceLink;
use provisioning::{HubUrl, Scheme, loggable_url};
use static_cell::StaticCell;

use crate::status;
use crate::tools::Board;

/// The largest incoming text message (larger binary frames are skipped).
const RX_BUF_LEN: usize = 8 * 1024;
/// The HTTP upgrade response headers.
const HTTP_BUF_LEN: usize = 2048;
const TCP_TX_LEN: usize = 4096;
const TCP_RX_LEN: usize = 4096;
const DNS_TIMEOUT: Duration = Duration::from_secs(10);

/// BOOT-button presses (their running count), from the button task to the connection. Presses
/// made while offline wait here (up to 8).
pub static BUTTON_PRESSES: Channel<CriticalSectionRawMutex, u32, 8> = Channel::new();

fn random() -> u32 {
    Rng::new().random()
}

fn reboot_requested(b: &Board) -> bool {
    b.reboot_requested
}

/// Connects to the hub and keeps reconnecting, forever.
pub async fn run(stack: Stack<'static>, hub_url: String, id: Identity, mut link: DeviceLink<Board>) -> ! {
    let shown = loggable_url(&hub_url);
    let url = match HubUrl::parse(&hub_url) {
        Ok(u) if u.scheme == Scheme::Wss => crate::park(alloc::format!(
            "hub: {shown}: wss:// needs TLS, which this firmware does not include; provision a ws:// URL \
             (a TLS-terminating proxy can sit in front of the hub)"
        ))
        .await,
        Ok(u) => u,
        // The provisioning decoder has checked the URL already.
        Err(e) => crate::park(alloc::format!("hub: {shown}: {e}")).await,
    };
    static TCP_BUFFERS: StaticCell<TcpBuffers<1, TCP_TX_LEN, TCP_RX_LEN>> = StaticCell::new();
    let tcp = Tcp::new(stack, TCP_BUFFERS.init(TcpBuffers::new()));
    let mut rx = vec![0u8; RX_BUF_LEN];
    let mut http_buf = vec![0u8; HTTP_BUF_LEN];
    let board = hub_link::Board { random, reboot_requested, presses: &BUTTON_PRESSES };
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
        let result = match resolve(stack, url.host).await {
            Ok(ip) => {
                info!("hub: {} is {ip}", url.host);
                let addr = SocketAddr::new(IpAddr::V4(ip), url.port);
                let end =
                    hub_link::session(&tcp, addr, &url, &id, &mut link, &board, &timing, &mut rx, &mut http_buf, &mut greeted)
                        .await;
                if matches!(end, End::Reboot) {
                    info!("hub: rebooting as asked");
                    Timer::after(Duration::from_millis(100)).await; // let the log line out
                    esp_hal::system::software_reset();
                }
                alloc::format!("{end}")
            }
            Err(why) => String::from(why),
        };
        status::set_ipv4(None);
        if greeted {
            warn!("hub: connection ended: {result}");
        } else {
            warn!("hub: connection failed: {result}");
        }
        let delay = backoff.delay(greeted, random());
        info!("hub: reconnecting in {} ms", delay.as_millis());
        Timer::after(delay).await;
    }
}

/// The hub's IPv4 address (an IP literal is returned as is).
async fn resolve(stack: Stack<'static>, host: &str) -> Result<core::net::Ipv4Addr, &'static str> {
    let addrs = match with_timeout(DNS_TIMEOUT, stack.dns_query(host, DnsQueryType::A)).await {
        Ok(Ok(a)) => a,
        Ok(Err(_)) => return Err("DNS lookup of the hub failed"),
        Err(_) => return Err("DNS lookup of the hub timed out"),
    };
    // Matched on the core type so that IPv6 formatting is not linked in (~1.7 KB).
    match addrs.first().map(|a| IpAddr::from(*a)) {
        Some(IpAddr::V4(ip)) => Ok(ip),
        _ => Err("DNS gave no IPv4 address for the hub"),
    }
}
