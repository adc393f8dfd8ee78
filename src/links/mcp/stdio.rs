//! An MCP server run as a child process, spoken to over its stdin and stdout (the stdio
//! transport: one JSON-RPC message per line).
//!
//! Rules:
//! - The command line is split into words as a POSIX shell would (quotes, backslashes), and no
//!   shell is run: `$(…)`, `;` and globs are plain characters.
//! - The child's environment is clean: only [`INHERITED`] variables of ours, then what the user
//!   gave (`--stdio-env`, `[stdio] env`). A server of a third party never sees our tokens.
//! - The child runs in a process group of its own (a Ctrl-C at the terminal reaches mcpdev, which
//!   can then cancel on the server before it ends it), dies with mcpdev (`PR_SET_PDEATHSIG`), and
//!   is ended on close: stdin closed, then SIGTERM, then SIGKILL, each after a short wait.
//! - A stdout line longer than [`MAX_MESSAGE`] ends the session with [`McpFailure::TooLarge`];
//!   at most that much is ever held. Lines that are not JSON are skipped (logged, rate-limited).
//! - stderr is captured, never passed through: the last [`STDERR_TAIL`] bytes are kept and named
//!   in the error when the server ends (logged at debug level as they come).

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::McpFailure;
use super::wire::{Incoming, MAX_MESSAGE, QUEUE, Wire};

/// Our environment variables a stdio server gets (as the MCP SDKs pass them by default).
pub const INHERITED: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"];
/// The bytes of a server's stderr kept for the error that names why it ended.
pub const STDERR_TAIL: usize = 4096;
/// How long a server has to exit after each step of its ending (stdin closed, SIGTERM).
const EXIT_WAIT: Duration = Duration::from_millis(500);

/// A stdio server to start: its words and the environment it gets on top of [`INHERITED`]
/// (`None`: take ours).
#[derive(Debug, Clone, Default)]
pub struct StdioCommand {
    pub words: Vec<String>,
    pub env: Vec<(String, Option<String>)>,
}

impl StdioCommand {
    /// `cmd args…` split as a shell would, and `NAME=value` (or `NAME`, to pass ours on) pairs.
    pub fn parse(line: &str, env: &[String]) -> Result<Self, String> {
        let words = shlex::split(line).ok_or_else(|| format!("--stdio {line:?}: a quote is not closed"))?;
        if words.is_empty() {
            return Err("--stdio needs a command, e.g. --stdio \"npx -y @modelcontextprotocol/server-everything\"".into());
        }
        let env = env
            .iter()
            .map(|pair| match pair.split_once('=') {
                Some(("", _)) => Err(format!("--stdio-env {pair:?}: the name is empty")),
                Some((k, v)) => Ok((k.to_string(), Some(v.to_string()))),
                None => Ok((pair.clone(), None)),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { words, env })
    }

    /// The command as people read it (for errors and `device_id`).
    pub fn display(&self) -> String {
        self.words.iter().map(|w| shlex::try_quote(w).map_or_else(|_| w.clone(), |q| q.into_owned())).collect::<Vec<_>>().join(" ")
    }
}

/// The last bytes a child wrote to stderr.
#[derive(Default)]
struct Tail(VecDeque<u8>);

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.0.extend(bytes);
        let over = self.0.len().saturating_sub(STDERR_TAIL);
        self.0.drain(..over);
    }
    fn text(&self) -> String {
        let (a, b) = self.0.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).trim().to_string()
    }
}

fn with_tail(message: String, tail: &Mutex<Tail>) -> String {
    let tail = tail.lock().map(|t| t.text()).unwrap_or_default();
    if tail.is_empty() { format!("{message} (it wrote nothing on stderr)") } else { format!("{message}; the end of its stderr:\n{tail}") }
}

/// Starts the server and returns its transport.
pub fn spawn(cmd: &StdioCommand) -> Result<Wire, McpFailure> {
    let shown = cmd.display();
    let mut command = Command::new(&cmd.words[0]);
    command.args(&cmd.words[1..]).env_clear().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).process_group(0);
    for name in INHERITED {
        if let Some(v) = std::env::var_os(name) {
            command.env(name, v);
        }
    }
    for (k, v) in &cmd.env {
        match v {
            Some(v) => command.env(k, v),
            None => command.env(k, std::env::var_os(k).unwrap_or_default()),
        };
    }
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound { " (is it installed and on PATH?)" } else { "" };
        McpFailure::Unreachable(format!("cannot start the stdio server `{shown}`: {e}{hint}"))
    })?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(mut stdin), Some(stdout), Some(mut stderr)) = (stdin, stdout, stderr) else {
        return Err(McpFailure::Unreachable(format!("the stdio server `{shown}` has no pipes")));
    };
    let tail = Arc::new(Mutex::new(Tail::default()));
    let child = Arc::new(tokio::sync::Mutex::new(child));

    let stderr_tail = tail.clone();
    let stderr_done = tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            tracing::debug!(target: "mcpdev::stdio", "server stderr: {}", String::from_utf8_lossy(&buf[..n]).trim_end());
            if let Ok(mut t) = stderr_tail.lock() {
                t.push(&buf[..n]);
            }
        }
    });

    let (in_tx, in_rx) = mpsc::channel(QUEUE);
    let (reader_child, reader_shown) = (child.clone(), shown.clone());
    tokio::spawn(async move {
        let why = read_lines(stdout, &in_tx).await;
        let why = match why {
            Some(too_large) => {
                let _ = reader_child.lock().await.start_kill();
                too_large
            }
            None => {
                // The end of stdout: give stderr and the exit status a moment to arrive.
                let _ = tokio::time::timeout(EXIT_WAIT, stderr_done).await;
                let status = tokio::time::timeout(EXIT_WAIT, async { reader_child.lock().await.wait().await.ok() }).await.ok().flatten();
                let how = status.map_or("closed its stdout".to_string(), |s| format!("exited ({s})"));
                McpFailure::Unreachable(with_tail(format!("the stdio server `{reader_shown}` {how}"), &tail))
            }
        };
        let _ = in_tx.send(Incoming::Closed(why)).await;
    });

    let (out_tx, mut out_rx) = mpsc::channel::<Value>(QUEUE);
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let mut line = msg.to_string().into_bytes();
            line.push(b'\n');
            if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                return; // the child is gone; the reader says why
            }
        }
    });

    let close = Box::new(move || -> super::wire::CloseFuture {
        Box::pin(async move {
            let _ = tokio::time::timeout(super::CLOSE_WAIT, writer).await;
            end_child(&mut *child.lock().await).await;
        })
    });
    Ok(Wire { out: out_tx, incoming: in_rx, close })
}

/// Reads stdout line by line, each at most [`MAX_MESSAGE`] bytes; `Some` with the failure when a
/// line is longer, `None` at the end of stdout.
async fn read_lines(stdout: tokio::process::ChildStdout, to: &mpsc::Sender<Incoming>) -> Option<McpFailure> {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let mut skipped = 0u64;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) | Err(_) => return None,
            Ok(chunk) => chunk,
        };
        let (take, done) = match memchr(chunk) {
            Some(at) => (at + 1, true),
            None => (chunk.len(), false),
        };
        if line.len() + take > MAX_MESSAGE + 1 {
            return Some(McpFailure::TooLarge(format!("the stdio server sent a message of more than {} MiB; mcpdev reads at most that much of one message, and ended the server", MAX_MESSAGE >> 20)));
        }
        line.extend_from_slice(&chunk[..take]);
        reader.consume(take);
        if !done {
            continue;
        }
        if !line.trim_ascii().is_empty() {
            // The line's own bytes become the message (no copy when it has no space around it);
            // the next line starts a new buffer.
            let text = std::mem::take(&mut line);
            match String::from_utf8(text).map_err(|e| e.to_string()).and_then(|t| super::wire::message(trimmed(t)).ok_or_else(|| "not JSON".to_string())) {
                Ok(msg) => {
                    if to.send(Incoming::Message(msg)).await.is_err() {
                        return None;
                    }
                }
                Err(e) => {
                    skipped += 1;
                    if skipped.is_power_of_two() {
                        tracing::warn!("the stdio server wrote a line that is not JSON-RPC ({e}); skipped ({skipped} so far)");
                    }
                }
            }
        }
        line.clear();
        if line.capacity() > 1024 * 1024 {
            line.shrink_to(64 * 1024);
        }
    }
}

/// The line without the space around it (its newline), in its own buffer.
fn trimmed(mut text: String) -> String {
    text.truncate(text.trim_end().len());
    let start = text.len() - text.trim_start().len();
    text.drain(..start);
    text
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Stdin is closed by now: wait, then SIGTERM, wait, then SIGKILL.
async fn end_child(child: &mut Child) {
    if tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_ok() {
        return;
    }
    if let Some(pid) = child.id() {
        // SAFETY: a signal to our own child, whose pid we hold unreaped.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        if tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_a_shell_would_with_no_shell() {
        let c = StdioCommand::parse(r#"node "my server.js" --x='a b' $(rm -rf) ;"#, &["A=1".into(), "HOME".into()]).unwrap();
        assert_eq!(c.words, ["node", "my server.js", "--x=a b", "$(rm", "-rf)", ";"]);
        assert_eq!(c.env, [("A".to_string(), Some("1".to_string())), ("HOME".to_string(), None)]);
        assert!(StdioCommand::parse("node 'open", &[]).unwrap_err().contains("quote"));
        assert!(StdioCommand::parse("  ", &[]).is_err());
        assert!(StdioCommand::parse("x", &["=v".into()]).is_err());
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_bytes() {
        let mut t = Tail::default();
        t.push(&vec![b'a'; STDERR_TAIL]);
        t.push(b"the end");
        assert_eq!(t.0.len(), STDERR_TAIL);
        assert!(t.text().ends_with("the end"));
    }
}
