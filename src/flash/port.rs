//! Serial ports: which exist, which look like an ESP board, which one to use.
//!
//! serialport is built without libudev, so on Linux its port list has no USB details; they are
//! read from sysfs here instead (`/sys/class/tty/<name>/device/..` up to the USB device).

use std::fmt;

use serialport::{SerialPortType, UsbPortInfo};

use crate::exit::{CodedError, Exit};

/// USB VID/PID pairs of ESP boards: the chips' own USB-Serial-JTAG, and the usual USB-UART bridges.
pub const KNOWN_BRIDGES: &[(u16, u16, &str)] = &[
    (0x303a, 0x1001, "ESP USB-Serial-JTAG"),
    (0x303a, 0x0002, "ESP USB CDC"),
    (0x10c4, 0xea60, "CP210x"),
    (0x1a86, 0x7523, "CH340"),
    (0x1a86, 0x55d4, "CH9102"),
    (0x0403, 0x6001, "FTDI FT232"),
    (0x0403, 0x6010, "FTDI FT2232"),
];

/// A port as seen on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenPort {
    pub name: String,
    pub usb: Option<(u16, u16)>,
}

impl SeenPort {
    /// What kind of ESP board this looks like, if any.
    pub fn bridge(&self) -> Option<&'static str> {
        let (vid, pid) = self.usb?;
        KNOWN_BRIDGES.iter().find(|(v, p, _)| *v == vid && *p == pid).map(|(_, _, n)| *n)
    }

    /// What espflash needs to pick a reset strategy (USB-Serial-JTAG resets differently).
    pub fn usb_info(&self) -> UsbPortInfo {
        let (vid, pid) = self.usb.unwrap_or((0, 0));
        UsbPortInfo { vid, pid, serial_number: None, manufacturer: None, product: None }
    }
}

impl fmt::Display for SeenPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.usb, self.bridge()) {
            (Some((v, p)), Some(b)) => write!(f, "{} (USB {v:04x}:{p:04x}, {b})", self.name),
            (Some((v, p)), None) => write!(f, "{} (USB {v:04x}:{p:04x})", self.name),
            (None, _) => write!(f, "{} (not USB)", self.name),
        }
    }
}

/// Every serial port the system reports, with USB VID/PID where known.
pub fn available() -> Vec<SeenPort> {
    let mut ports: Vec<SeenPort> = serialport::available_ports()
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let usb = match &p.port_type {
                SerialPortType::UsbPort(u) => Some((u.vid, u.pid)),
                _ => sysfs_usb_ids(&p.port_name),
            };
            SeenPort { name: p.port_name, usb }
        })
        .collect();
    ports.sort_by(|a, b| a.name.cmp(&b.name));
    ports.dedup_by(|a, b| a.name == b.name);
    ports
}

/// The USB idVendor/idProduct above `/sys/class/tty/<name>/device`, on Linux.
fn sysfs_usb_ids(port: &str) -> Option<(u16, u16)> {
    let name = std::path::Path::new(port).file_name()?;
    let mut dir = std::fs::canonicalize(std::path::Path::new("/sys/class/tty").join(name).join("device")).ok()?;
    for _ in 0..4 {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok().and_then(|s| u16::from_str_radix(s.trim(), 16).ok());
        if let (Some(v), Some(p)) = (read("idVendor"), read("idProduct")) {
            return Some((v, p));
        }
        dir = dir.parent()?.to_path_buf();
    }
    None
}

/// The list of ports for error messages, one per line.
pub fn list(ports: &[SeenPort]) -> String {
    if ports.is_empty() {
        return "ports seen: none".to_string();
    }
    let mut s = String::from("ports seen:");
    for p in ports {
        s.push_str(&format!("\n  {p}"));
    }
    s
}

/// The port to use: `--port`/`MCPDEV_PORT` if given (it must exist), else the one port that looks
/// like an ESP board. Errors carry exit code 8 and list the ports seen.
pub fn select(explicit: Option<&str>, seen: &[SeenPort]) -> Result<SeenPort, CodedError> {
    let port_error = |m: String| CodedError::new(Exit::Port, format!("{m}\n{}", list(seen)));
    if let Some(name) = explicit {
        if let Some(p) = seen.iter().find(|p| p.name == name) {
            return Ok(p.clone());
        }
        // Ports the system does not enumerate (ptys, symlinks like /dev/serial/by-id/…) are fine
        // when they exist.
        if std::path::Path::new(name).exists() {
            let resolved = std::fs::canonicalize(name).ok();
            let known = seen.iter().find(|p| resolved.as_deref() == Some(std::path::Path::new(&p.name)));
            return Ok(SeenPort { name: name.to_string(), usb: known.and_then(|p| p.usb).or_else(|| sysfs_usb_ids(name)) });
        }
        return Err(port_error(format!("serial port {name} does not exist")));
    }
    let candidates: Vec<&SeenPort> = seen.iter().filter(|p| p.bridge().is_some()).collect();
    match candidates.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(port_error(
            "no serial port found that looks like an ESP board (USB-Serial-JTAG, CP210x, CH340/CH9102, FTDI); \
connect the board or name its port with --port or MCPDEV_PORT"
                .into(),
        )),
        several => {
            let names: Vec<&str> = several.iter().map(|p| p.name.as_str()).collect();
            Err(port_error(format!("several ports look like ESP boards ({}): choose one with --port or MCPDEV_PORT", names.join(", "))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, usb: Option<(u16, u16)>) -> SeenPort {
        SeenPort { name: name.into(), usb }
    }

    #[test]
    fn the_one_esp_looking_port_is_chosen() {
        let seen = [port("/dev/ttyS0", None), port("/dev/ttyACM0", Some((0x303a, 0x1001))), port("/dev/ttyUSB9", Some((0x046d, 0xc52b)))];
        assert_eq!(select(None, &seen).unwrap().name, "/dev/ttyACM0");
    }

    #[test]
    fn none_or_several_candidates_are_port_errors_listing_what_was_seen() {
        let none = select(None, &[port("/dev/ttyS0", None)]).unwrap_err();
        assert_eq!(none.exit, Exit::Port);
        assert!(none.message.contains("no serial port found") && none.message.contains("/dev/ttyS0 (not USB)"), "{}", none.message);
        let empty = select(None, &[]).unwrap_err();
        assert!(empty.message.contains("ports seen: none"), "{}", empty.message);
        let two = [port("/dev/ttyACM0", Some((0x303a, 0x1001))), port("/dev/ttyUSB0", Some((0x10c4, 0xea60)))];
        let several = select(None, &two).unwrap_err();
        assert_eq!(several.exit, Exit::Port);
        assert!(several.message.contains("several ports") && several.message.contains("CP210x"), "{}", several.message);
    }

    #[test]
    fn a_named_port_must_exist() {
        let err = select(Some("/dev/missing-mcpdev"), &[port("/dev/ttyS0", None)]).unwrap_err();
        assert_eq!(err.exit, Exit::Port);
        assert!(err.message.contains("/dev/missing-mcpdev does not exist") && err.message.contains("/dev/ttyS0"), "{}", err.message);
        assert_eq!(select(Some("/dev/null"), &[]).unwrap().name, "/dev/null");
    }
}
