use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use mcpdev::cli::Cli;
use mcpdev::exit::{Exit, exit_for};

fn main() -> ExitCode {
    // `mcpdev generate-assets DIR`: for maintainers and packagers (it writes man/ and
    // completions/), so it is not part of the command line people see and complete.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == "generate-assets") {
        let Some(dir) = argv.get(2).filter(|_| argv.len() == 3) else {
            eprintln!("usage: mcpdev generate-assets DIR   (writes DIR/man/ and DIR/completions/)");
            return Exit::Usage.into();
        };
        return match mcpdev::commands::generate::write_assets(std::path::Path::new(dir)) {
            Ok(()) => Exit::Ok.into(),
            Err(e) => {
                eprintln!("error: {e:#}");
                Exit::Internal.into()
            }
        };
    }
    let file = match mcpdev::config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Usage.into();
        }
    };
    let matches = mcpdev::config::apply(Cli::command(), &file).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    init_tracing(cli.global.verbose, cli.global.color);
    mcpdev::tls::install_crypto_provider();
    let json = cli.global.json;
    let color = cli.global.color;
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Internal.into();
        }
    };
    match runtime.block_on(mcpdev::commands::run(cli)) {
        Ok(()) => Exit::Ok.into(),
        Err(err) => {
            let exit = exit_for(&err);
            let help = mcpdev::exit::help_for(&err);
            if json {
                let mut error = serde_json::json!({"code": exit.code(), "message": format!("{err:#}")});
                if let Some(h) = help {
                    error["help"] = serde_json::json!(h);
                }
                eprintln!("{}", serde_json::json!({"error": error}));
            } else if exit != Exit::Interrupted {
                let color = mcpdev::commands::output::use_color(color, std::io::IsTerminal::is_terminal(&std::io::stderr()));
                eprintln!("{}", mcpdev::commands::output::error_lines(&format!("{err:#}"), help, color));
            }
            exit.into()
        }
    }
}

/// Logs go to stderr: `-v` info, `-vv` debug, `-vvv` trace; `RUST_LOG` overrides; warnings by default.
fn init_tracing(verbose: u8, color: mcpdev::cli::ColorChoice) {
    use tracing_subscriber::EnvFilter;
    // rmcp logs transport failures that mcpdev reports itself; show them only with -vv.
    let level = match verbose {
        0 => "warn,rmcp=off",
        1 => "info,rmcp=warn",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let ansi = mcpdev::commands::output::use_color(color, std::io::IsTerminal::is_terminal(&std::io::stderr()));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}
