//! The BOOT button (GPIO9, low while pressed): each press goes to the hub connection, which queues
//! a notification in the MCP server's outbox.

use embassy_time::{Duration, Timer};
use esp_hal::gpio::Input;
use log::warn;

use crate::hub::BUTTON_PRESSES;

const DEBOUNCE: Duration = Duration::from_millis(20);

#[embassy_executor::task]
pub async fn button_task(mut button: Input<'static>) {
    let mut presses: u32 = 0;
    loop {
        button.wait_for_falling_edge().await;
        Timer::after(DEBOUNCE).await;
        if button.is_high() {
            continue; // a bounce, not a press
        }
        presses = presses.wrapping_add(1);
        if BUTTON_PRESSES.try_send(presses).is_err() {
            warn!("button: press {presses} dropped, earlier presses are still waiting to be sent");
        }
        button.wait_for_high().await;
        Timer::after(DEBOUNCE).await;
    }
}
