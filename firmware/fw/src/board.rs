//! What differs between the chips this firmware builds for.

use provisioning::LedConfig;

#[cfg(all(feature = "esp32c3", feature = "esp32c6"))]
compile_error!("enable exactly one chip feature: esp32c3 or esp32c6");
#[cfg(not(any(feature = "esp32c3", feature = "esp32c6")))]
compile_error!("enable one chip feature: esp32c3 or esp32c6");

#[cfg(feature = "esp32c3")]
mod chip {
    use provisioning::LedConfig;

    pub const NAME: &str = "esp32c3";
    /// ESP-IDF's `esp_chip_model_t` value, as the stock firmware reports it.
    pub const MODEL: u8 = 5;
    pub const CORES: u8 = 1;
    /// The ESP32-C3 SuperMini's blue LED (lit when low). On Espressif's DevKitM-1 GPIO8 drives an
    /// addressable RGB LED instead, which PWM cannot control: provision another pin there.
    pub const DEFAULT_LED: LedConfig = LedConfig { gpio: 8, active_low: true };
    /// GPIOs the LED may be on: not GPIO9 (BOOT button), GPIO11-17 (flash), GPIO18/19 (USB) or
    /// GPIO20/21 (UART0, the console on boards without USB).
    pub const LED_PINS: &[u8] = &[0, 1, 2, 3, 4, 5, 6, 7, 8, 10];
}

#[cfg(feature = "esp32c6")]
mod chip {
    use provisioning::LedConfig;

    pub const NAME: &str = "esp32c6";
    pub const MODEL: u8 = 13;
    pub const CORES: u8 = 1;
    /// The ESP32-C6 SuperMini's LED. (GPIO8 is an addressable RGB LED on most C6 boards.)
    pub const DEFAULT_LED: LedConfig = LedConfig { gpio: 15, active_low: false };
    /// Not GPIO9 (BOOT), GPIO10/11 and 24-30 (flash on in-package-flash variants), GPIO12/13 (USB)
    /// or GPIO16/17 (UART0).
    pub const LED_PINS: &[u8] = &[0, 1, 2, 3, 4, 5, 6, 7, 8, 14, 15, 18, 19, 20, 21, 22, 23];
}

pub use chip::{CORES, MODEL, NAME};

/// The LED to drive: the provisioned one if this chip can use that pin, else the board default.
pub fn led_config(provisioned: Option<LedConfig>) -> LedConfig {
    match provisioned {
        Some(led) if chip::LED_PINS.contains(&led.gpio) => led,
        Some(led) => {
            log::warn!(
                "LED: GPIO{} cannot be used on {} (allowed: {:?}); using GPIO{}",
                led.gpio,
                NAME,
                chip::LED_PINS,
                chip::DEFAULT_LED.gpio
            );
            chip::DEFAULT_LED
        }
        None => chip::DEFAULT_LED,
    }
}
