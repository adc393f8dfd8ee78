//! `flash --monitor`: the device's serial log, line by line, until Ctrl-C. USB-Serial-JTAG boards
//! (the usual ESP32-C3/C6 boards) drop off USB when they reset and come back a moment later, so a
//! port that goes away is reopened when it returns.

use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Copies the serial log of `port` to `out` until `stop` is set: one line each (NDJSON
/// `{"event":"log","line":…}` with `json`), and a note while the port is gone.
pub fn monitor(port: &str, baud: u32, json: bool, out: &mut dyn Write, stop: &AtomicBool) -> std::io::Result<()> {
    let mut pending = Vec::new();
    let mut gone_said = false;
    while !stop.load(Ordering::Relaxed) {
        let mut serial = match serialport::new(port, baud).timeout(Duration::from_millis(100)).open() {
            Ok(s) => {
                gone_said = false;
                s
            }
            Err(_) => {
                if !gone_said {
                    note(out, json, &format!("{port} is gone (a USB-Serial-JTAG board re-enumerates after a reset); waiting for it"))?;
                    gone_said = true;
                }
                // Polling the device node: the kernel gives no portable "port is back" event.
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        let mut buf = [0u8; 1024];
        while !stop.load(Ordering::Relaxed) {
            match serial.read(&mut buf) {
                Ok(n) => {
                    pending.extend_from_slice(&buf[..n]);
                    emit_lines(&mut pending, json, out)?;
                }
                Err(e) if e.kind() == ErrorKind::TimedOut || e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }
    if !pending.is_empty() {
        pending.push(b'\n');
        emit_lines(&mut pending, json, out)?;
    }
    Ok(())
}

fn emit_lines(pending: &mut Vec<u8>, json: bool, out: &mut dyn Write) -> std::io::Result<()> {
    while let Some(end) = pending.iter().position(|b| *b == b'\n') {
        let raw: Vec<u8> = pending.drain(..=end).collect();
        let line = String::from_utf8_lossy(&raw[..end]);
        let line = line.trim_end_matches('\r');
        if json {
            writeln!(out, "{}", serde_json::json!({"event": "log", "line": line}))?;
        } else {
            writeln!(out, "{line}")?;
        }
    }
    out.flush()
}

fn note(out: &mut dyn Write, json: bool, message: &str) -> std::io::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::json!({"event": "monitor", "message": message}))?;
    } else {
        eprintln!("({message})");
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc;

    use super::*;

    /// Sends every complete output line to the test, so it can wait for output without sleeping.
    struct Tap(mpsc::Sender<String>, Vec<u8>);

    impl Write for Tap {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.1.extend_from_slice(b);
            while let Some(end) = self.1.iter().position(|c| *c == b'\n') {
                let line: Vec<u8> = self.1.drain(..=end).collect();
                let _ = self.0.send(String::from_utf8_lossy(&line).into_owned());
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn openpty() -> (std::fs::File, String) {
        let (mut master, mut slave) = (0, 0);
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: openpty writes two fds and a NUL-terminated name into the buffers given.
        let rc = unsafe { libc::openpty(&mut master, &mut slave, name.as_mut_ptr(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(rc, 0, "openpty failed");
        // Raw, like a real serial line: no CR/LF translation of what is written before the
        // monitor opens the port. SAFETY: `slave` is an open fd; `t` is fully written by tcgetattr.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            assert_eq!(libc::tcgetattr(slave, &mut t), 0);
            libc::cfmakeraw(&mut t);
            assert_eq!(libc::tcsetattr(slave, libc::TCSANOW, &t), 0);
        }
        // SAFETY: `slave` is an open fd we own; the monitor opens the pty by its name instead.
        unsafe { libc::close(slave) };
        // SAFETY: `name` was NUL-terminated by openpty.
        let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
        // SAFETY: `master` is an open fd we own from here on.
        (unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(master) }, path)
    }

    #[test]
    fn prints_each_line_then_waits_for_a_port_that_went_away() {
        let (mut master, path) = openpty();
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (stop, path) = (stop.clone(), path.clone());
            std::thread::spawn(move || monitor(&path, 115_200, true, &mut Tap(tx, Vec::new()), &stop))
        };
        master.write_all(b"ESP-ROM:esp32c3\r\nmcpdev-fw 0.1.0 boo").unwrap();
        master.write_all(b"ting\r\n\xffbad byte\n").unwrap();
        let next = || rx.recv_timeout(Duration::from_secs(10)).expect("the monitor printed nothing in time");
        assert_eq!(next(), "{\"event\":\"log\",\"line\":\"ESP-ROM:esp32c3\"}\n");
        assert_eq!(next(), "{\"event\":\"log\",\"line\":\"mcpdev-fw 0.1.0 booting\"}\n");
        assert_eq!(next(), "{\"event\":\"log\",\"line\":\"\u{fffd}bad byte\"}\n");
        drop(master);
        let gone = next();
        assert!(gone.contains("\"event\":\"monitor\"") && gone.contains("is gone"), "{gone}");
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap().unwrap();
    }
}
