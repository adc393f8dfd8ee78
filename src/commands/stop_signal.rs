//! The signal that stops a long-running command (`serve`, `sim`, `watch`, `check`, the flash
//! monitor).
//!
//! Rules:
//! - SIGTERM (what `kill`, systemd and container runtimes send) stops a command exactly as
//!   Ctrl-C (SIGINT) does: the same orderly shutdown, and exit 130 ([`Exit::Interrupted`]), never
//!   the shell's 143 of a process killed before it could clean up.
//! - The handlers are installed before a command says it is ready ([`install`]): a script that
//!   kills `serve` the moment its `--ready-file` appears gets the same clean shutdown.
//!
//! [`Exit::Interrupted`]: crate::exit::Exit::Interrupted

/// Installed handlers for SIGINT and SIGTERM; [`Stop::wait`] waits for either.
pub struct Stop {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

/// Installs the handlers now. An error only if they cannot be installed.
pub fn install() -> std::io::Result<Stop> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Stop { int: signal(SignalKind::interrupt())?, term: signal(SignalKind::terminate())? })
    }
    #[cfg(not(unix))]
    {
        Ok(Stop {})
    }
}

impl Stop {
    /// Waits for SIGINT or SIGTERM and says which came.
    pub async fn wait(mut self) -> std::io::Result<&'static str> {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => Ok("SIGINT"),
                _ = self.term.recv() => Ok("SIGTERM"),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.map(|()| "Ctrl-C")
        }
    }
}

/// Installs the handlers and waits for SIGINT or SIGTERM.
pub async fn stop_signal() -> std::io::Result<&'static str> {
    install()?.wait().await
}
