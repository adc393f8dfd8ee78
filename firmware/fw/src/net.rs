//! Wi-Fi station with reconnect, and the embassy-net stack's runner.

use alloc::string::String;

use embassy_futures::select::{Either, select};
use embassy_net::Runner;
use embassy_time::{Duration, Timer};
use esp_radio::wifi::sta::StationConfig;
use esp_radio::wifi::{AuthenticationMethodConfig, Config, Interface, WifiController};
use log::{info, warn};

use crate::status;

const MIN_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// How often the RSSI is refreshed while connected.
const RSSI_PERIOD: Duration = Duration::from_secs(10);

/// Drives the network stack (DHCP, ARP, TCP timers). Never returns.
#[embassy_executor::task]
pub async fn net_runner(mut runner: Runner<'static, Interface>) {
    runner.run().await
}

/// Keeps the station connected: connect, wait for the disconnect, retry with backoff.
#[embassy_executor::task]
pub async fn wifi_task(mut controller: WifiController<'static>, ssid: String, password: String) {
    let auth = if password.is_empty() {
        AuthenticationMethodConfig::Open
    } else {
        match password.as_str().try_into() {
            // WPA2-Personal as the minimum: also joins WPA2/WPA3 mixed networks.
            Ok(p) => AuthenticationMethodConfig::Wpa2Personal(p),
            Err(e) => crate::park(alloc::format!("the Wi-Fi password is unusable: {e:?}")).await,
        }
    };
    let ssid_param = match ssid.as_str().try_into() {
        Ok(s) => s,
        Err(e) => crate::park(alloc::format!("the Wi-Fi SSID is unusable: {e:?}")).await,
    };
    let config = Config::Station(StationConfig::default().with_ssid(ssid_param).with_authentication(auth));
    if let Err(e) = controller.set_config(&config) {
        crate::park(alloc::format!("the Wi-Fi driver refused the station settings: {e:?}")).await;
    }

    let mut retry = MIN_RETRY;
    loop {
        info!("Wi-Fi: connecting to '{ssid}'");
        match controller.connect_async().await {
            Ok(connected) => {
                info!("Wi-Fi: connected to '{ssid}' on channel {}", connected.channel);
                status::set_wifi(true, connected.channel);
                retry = MIN_RETRY;
                loop {
                    if let Ok(rssi) = controller.rssi() {
                        status::set_rssi(rssi);
                    }
                    match select(controller.wait_for_disconnect_async(), Timer::after(RSSI_PERIOD)).await {
                        Either::First(Ok(info)) => {
                            warn!("Wi-Fi: disconnected ({:?}, rssi {})", info.reason, info.rssi);
                            break;
                        }
                        Either::First(Err(_)) => break, // already disconnected
                        Either::Second(()) => {}
                    }
                }
                status::set_wifi(false, 0);
            }
            Err(e) => warn!("Wi-Fi: could not connect to '{ssid}': {e:?}"),
        }
        info!("Wi-Fi: retrying in {} s", retry.as_secs());
        Timer::after(retry).await;
        retry = (retry * 2).min(MAX_RETRY);
    }
}
