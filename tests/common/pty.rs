//! Running the built `mcpdev` with its stdout and stderr on a pseudo-terminal, as a person at a
//! terminal sees it: raw mode (no `\n` -> `\r\n` from the line discipline, so every byte read is
//! one the command wrote), a chosen width (0 for the CI runners that report none).

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A command running on a pseudo-terminal; what it writes arrives on `output`.
pub struct PtyCommand {
    pub child: std::process::Child,
    pub output: std::sync::mpsc::Receiver<Vec<u8>>,
    /// Everything read so far.
    pub seen: Vec<u8>,
}

/// Opens a pseudo-terminal pair: the controlling side and the terminal, raw, `cols` wide.
fn open(cols: u16) -> (OwnedFd, OwnedFd) {
    // SAFETY: plain libc calls on descriptors this function owns; each result is checked.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(master >= 0, "posix_openpt");
        let master = OwnedFd::from_raw_fd(master);
        assert_eq!(libc::grantpt(master.as_raw_fd()), 0, "grantpt");
        assert_eq!(libc::unlockpt(master.as_raw_fd()), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()), 0, "ptsname_r");
        let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(slave >= 0, "open the terminal side");
        let slave = OwnedFd::from_raw_fd(slave);
        let mut t: libc::termios = std::mem::zeroed();
        assert_eq!(libc::tcgetattr(slave.as_raw_fd(), &mut t), 0);
        libc::cfmakeraw(&mut t);
        assert_eq!(libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t), 0);
        let size = libc::winsize { ws_row: if cols == 0 { 0 } else { 40 }, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        assert_eq!(libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &size), 0, "TIOCSWINSZ");
        (master, slave)
    }
}

impl PtyCommand {
    /// Starts `mcpdev ARGS` with stdout and stderr on a terminal `cols` wide (stdin empty).
    pub fn spawn(args: &[&str], env: &[(&str, &str)], cols: u16) -> Self {
        let (master, slave) = open(cols);
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
        cmd.args(args).stdin(std::process::Stdio::null()).stdout(slave.try_clone().unwrap()).stderr(slave.try_clone().unwrap()).env_remove("COLUMNS");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn mcpdev");
        // Only the child holds the terminal side now: its exit ends the reads (EIO).
        drop(slave);
        let (tx, output) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut file = std::fs::File::from(master);
            let mut buf = [0u8; 8192];
            while let Ok(n) = file.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Self { child, output, seen: Vec::new() }
    }

    /// Reads until what was read contains `text`, within `deadline`.
    pub fn read_until(&mut self, text: &str, deadline: Duration) -> bool {
        let end = std::time::Instant::now() + deadline;
        while !String::from_utf8_lossy(&self.seen).contains(text) {
            let left = end.saturating_duration_since(std::time::Instant::now());
            match self.output.recv_timeout(left) {
                Ok(chunk) => self.seen.extend(chunk),
                Err(_) => return false,
            }
        }
        true
    }

    /// Waits for the command to end (killing it after `deadline`) and reads the rest; the exit
    /// code and everything it wrote.
    pub fn finish(mut self, deadline: Duration) -> (Option<i32>, Vec<u8>) {
        let end = std::time::Instant::now() + deadline;
        // The reader ends when the command has exited and its terminal side is closed.
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            match self.output.recv_timeout(left) {
                Ok(chunk) => self.seen.extend(chunk),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!("mcpdev did not finish in time; it wrote: {}", String::from_utf8_lossy(&self.seen));
                }
            }
        }
        let status = self.child.wait().unwrap();
        (status.code(), self.seen)
    }
}

/// Runs `mcpdev ARGS` to its end on a terminal `cols` wide: exit code and output (stdout and
/// stderr, as the terminal got them).
pub fn run(args: &[&str], env: &[(&str, &str)], cols: u16) -> (Option<i32>, String) {
    let (code, out) = PtyCommand::spawn(args, env, cols).finish(Duration::from_secs(60));
    (code, String::from_utf8(out).expect("the terminal got UTF-8"))
}

/// [`run`] from async code (on a blocking thread).
pub async fn run_async(args: &[&str], env: &[(&str, &str)], cols: u16) -> (Option<i32>, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run(&args, &env, cols)
    })
    .await
    .unwrap()
}
