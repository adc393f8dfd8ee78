//! The signal that stops a long-running command (`serve`, `sim`, `watch`, `check`, the flash
//! monitor).
//!
//! Rule: SIGTERM (what `kill`, systemd and container runtimes send) stops a command exactly as
//! Ctrl-C (SIGINT) does: the same orderly shutdown, and exit 130 ([`Exit::Interrupted`]), never
//! the shell's 143 of a process killed before it could clean up.
//!
//! [`Exit::Interrupted`]: crate::exit::Exit::Interrupted

/// Waits for SIGINT or SIGTERM and says which came. An error only if the handlers cannot be
/// installed.
pub async fn stop_signal() -> std::io::Result<&'static str> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map(|()| "SIGINT"),
            _ = term.recv() => Ok("SIGTERM"),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.map(|()| "Ctrl-C")
    }
}
