//! Network facts the tools report, written by the tasks that know them.
//!
//! Plain load/store atomics: the ESP32-C3 has no compare-and-swap, and every value has exactly one
//! writer.

use core::net::Ipv4Addr;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU32, Ordering};

static WIFI_UP: AtomicBool = AtomicBool::new(false);
static RSSI: AtomicI32 = AtomicI32::new(0);
static CHANNEL: AtomicU8 = AtomicU8::new(0);
static IPV4: AtomicU32 = AtomicU32::new(0);

pub fn set_wifi(up: bool, channel: u8) {
    WIFI_UP.store(up, Ordering::Relaxed);
    CHANNEL.store(if up { channel } else { 0 }, Ordering::Relaxed);
    if !up {
        RSSI.store(0, Ordering::Relaxed);
        IPV4.store(0, Ordering::Relaxed);
    }
}

pub fn set_rssi(rssi: i32) {
    RSSI.store(rssi, Ordering::Relaxed);
}

pub fn set_ipv4(ip: Option<Ipv4Addr>) {
    IPV4.store(ip.map_or(0, u32::from), Ordering::Relaxed);
}

pub fn wifi_up() -> bool {
    WIFI_UP.load(Ordering::Relaxed)
}

/// dBm of the last beacon, `None` while not connected.
pub fn rssi() -> Option<i32> {
    let r = RSSI.load(Ordering::Relaxed);
    (wifi_up() && r != 0).then_some(r)
}

pub fn channel() -> u8 {
    CHANNEL.load(Ordering::Relaxed)
}

pub fn ipv4() -> Option<Ipv4Addr> {
    match IPV4.load(Ordering::Relaxed) {
        0 => None,
        ip => Some(Ipv4Addr::from(ip)),
    }
}
