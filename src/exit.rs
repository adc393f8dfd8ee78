//! The exit codes: small, stable, documented in `--help`, the man page and the README.
//! A number is never reused for another meaning.

use std::process::ExitCode;

/// Why a command ended. Its number is the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// An unexpected internal error.
    Internal = 1,
    /// Bad command line or configuration (clap's usage errors are 2 as well).
    Usage = 2,
    /// Refused: a token or credentials were missing or wrong (HTTP 401/403).
    Auth = 3,
    /// The device is not connected, or the hub or server cannot be reached.
    Unreachable = 4,
    /// The tool ran and failed: a JSON-RPC error or `isError: true`.
    ToolError = 5,
    /// No answer within the timeout.
    Timeout = 6,
    /// Nothing was sent: unknown tool, or arguments that fail the tool's `inputSchema`.
    InvalidCall = 7,
    /// Serial port: none found, the named one is missing, or it did not answer as an ESP chip.
    Port = 8,
    /// The device is connected but its onboarding (initialize, tools/list) failed after every
    /// retry: its tool list cannot be trusted.
    Onboarding = 9,
    /// `mcpdev check`: at least one check failed (or warned, with `--strict`).
    CheckFailed = 10,
    /// Interrupted (Ctrl-C).
    Interrupted = 130,
    /// Whoever read the output went away (`mcpdev tools list | head -1`): what a shell reports
    /// for a command ended by SIGPIPE, as `cat` and `grep` end.
    OutputClosed = 141,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e.code())
    }
}

/// The table shown in `--help` and the man page.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    success
  1    internal error
  2    usage: bad command line or configuration
  3    auth: token or credentials refused
  4    unreachable: device not connected, hub or server not reachable
  5    tool error: JSON-RPC error or isError:true from the tool
  6    timeout: no answer within --timeout
  7    invalid call: unknown tool or arguments that fail the inputSchema (nothing sent)
  8    serial port: none found, missing, or not an ESP chip (flash)
  9    onboarding failed: the device is connected but initialize or tools/list failed
       after every retry (the message names the step; tools list --refresh starts over)
  10   check failed: mcpdev check found a failure (or a warning, with --strict)
  130  interrupted: Ctrl-C (SIGINT), or SIGTERM to serve, which shuts down cleanly either way
  141  output closed: the reader of stdout went away (e.g. `| head -1`)";

/// Writes command output to stdout, for every layer that prints results (commands, flash
/// progress). A reader that went away ends the process quietly with [`Exit::OutputClosed`]
/// (never a panic, never a 0); any other write error ends it with [`Exit::Internal`].
pub fn write_stdout(bytes: &[u8]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(Exit::OutputClosed.code().into());
        }
        eprintln!("error: cannot write the output: {e}");
        std::process::exit(Exit::Internal.code().into());
    }
}

/// An error that carries its exit code, for commands to return through `anyhow`: what went
/// wrong (`message`) and, where there is advice, what to do about it (`help`, shown on a line of
/// its own as `help: …`).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CodedError {
    pub exit: Exit,
    pub message: String,
    pub help: Option<String>,
}

impl CodedError {
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self { exit, message: message.into(), help: None }
    }

    /// Adds the advice shown after the error.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Ctrl-C: exit code 130, and nothing more to say.
    pub fn interrupted() -> Self {
        Self::new(Exit::Interrupted, "interrupted")
    }
}

/// The advice an error carries, if it is a [`CodedError`] with some.
pub fn help_for(err: &anyhow::Error) -> Option<&str> {
    err.downcast_ref::<CodedError>().and_then(|c| c.help.as_deref())
}

/// The exit code for an error: its own if it carries one, else `Internal`.
pub fn exit_for(err: &anyhow::Error) -> Exit {
    err.downcast_ref::<CodedError>().map_or(Exit::Internal, |c| c.exit)
}
