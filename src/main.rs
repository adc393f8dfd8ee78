use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use mcpdev::cli::Cli;
use mcpdev::exit::{Exit, exit_for};

/// mimalloc for `serve` and `sim`, glibc's malloc for every one-shot command
/// ([`mcpdev::alloc`]). A hub that 100,000 devices joined at once (six hubs, one Mosquitto) kept
/// 8.6–9.2 KB a device with glibc's: the ramp's passing buffers, freed between the sessions
/// allocated at the same time, stay in its arenas. With mimalloc, which keeps sizes apart and
/// gives back the pages it no longer uses, the same build kept 6.7–7.9 KB (runs 9 and 10 of the
/// cluster at 100,000 devices, in `git log -p benches/README.md`). A one-shot call does not pay for mimalloc's first
/// pages (benches/README.md, start-up).
#[global_allocator]
static ALLOCATOR: mcpdev::alloc::Dispatch = mcpdev::alloc::Dispatch::from_command_line();

/// Hands the command line to the allocator's choice before `main` (and before any allocation of
/// ours): glibc calls `.init_array` entries with `argc, argv, envp`, in this priority as std's own.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[unsafe(link_section = ".init_array.00099")]
static CAPTURE_ARGS: extern "C" fn(std::ffi::c_int, *const *const std::ffi::c_char, *const *const std::ffi::c_char) = mcpdev::alloc::capture_args;

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
    // A remote token on the command line is in `ps` for every user, and in shell history: refused
    // before anything else, whatever the command.
    if let Some(at) = mcpdev::links::control_token::in_arguments(argv.iter().skip(1).map(|a| a.as_os_str())) {
        eprintln!(
            "error: argument {} carries a remote token: a token on the command line is visible to every user of this machine (ps) and stays in shell history, so it is refused.\n\
             help: revoke it on the hub's machine (`mcpdev remote-token revoke NAME`), make another, and give it in {} (a 0600 file) or {}",
            at + 1,
            mcpdev::links::control_token::HUB_TOKEN_FILE_ENV,
            mcpdev::links::control_token::HUB_TOKEN_ENV
        );
        return Exit::Usage.into();
    }
    let file = match mcpdev::config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Usage.into();
        }
    };
    let mut command = mcpdev::config::apply(Cli::command(), &file);
    let matches = match command.try_get_matches_from_mut(&argv) {
        Ok(m) => m,
        Err(e) => {
            // `mcpdev call TOOL --volume 50`: a tool's argument written as a flag.
            if let Some(hint) = mcpdev::cli::flag_as_tool_argument(&argv, &e) {
                eprintln!("error: {hint}");
                return Exit::Usage.into();
            }
            e.exit()
        }
    };
    // The definitions are not read again: freeing them, arg by arg, was 6 % of a one-shot call.
    std::mem::forget(command);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    // A hub named by a mcpdev.toml in the working directory (a cloned repository's) gets no
    // remote token unless the person names it themselves.
    if let Some(file) = mcpdev::config::path().filter(|p| p.is_relative())
        && file_names_the_hub(&matches, file_hub(&file).as_deref())
    {
        mcpdev::links::control_token::set_hub_from_working_directory(std::env::current_dir().map(|d| d.join(&file)).unwrap_or(file));
    }
    if matches!(cli.command, mcpdev::cli::Command::Serve(_) | mcpdev::cli::Command::Sim(_)) {
        tune_allocator();
    }
    init_tracing(cli.global.verbose, cli.global.color);
    tracing::debug!("memory allocator: {}", ALLOCATOR.name().unwrap_or("none yet"));
    for warning in mcpdev::cli::secrets_on_command_line(&matches) {
        tracing::warn!("{warning}");
    }
    mcpdev::tls::install_crypto_provider();
    let json = cli.global.json;
    let color = cli.global.color;
    let mut builder = if cli.command.is_one_shot() { tokio::runtime::Builder::new_current_thread() } else { tokio::runtime::Builder::new_multi_thread() };
    if ALLOCATOR.name() == Some("mimalloc") {
        // A worker collects its mimalloc heap when it idles after the hub gave memory back.
        builder.on_thread_park(mcpdev::hub::trim::collect_when_idle);
    }
    let runtime = match builder.enable_all().build() {
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
            // Ended by the signal the caller sent (Ctrl-C, `kill`): the exit code says it; no
            // error line, in JSON as at a terminal.
            if exit == Exit::Interrupted {
            } else if json {
                let mut error = serde_json::json!({"code": exit.code(), "message": format!("{err:#}")});
                if let Some(h) = help {
                    error["help"] = serde_json::json!(h);
                }
                eprintln!("{}", serde_json::json!({"error": error}));
            } else {
                let color = mcpdev::commands::output::use_color(color, std::io::IsTerminal::is_terminal(&std::io::stderr()));
                eprintln!("{}", mcpdev::commands::output::error_lines(&format!("{err:#}"), help, color));
            }
            exit.into()
        }
    }
}

/// The `hub` key of the config file at `file`, if it has one.
fn file_hub(file: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(file).ok().and_then(|t| toml::from_str::<mcpdev::config::FileConfig>(&t).ok()).and_then(|c| c.hub)
}

/// Whether the command's `--hub` is the config file's `hub` (neither a flag nor `MCPDEV_HUB`
/// gave it).
fn file_names_the_hub(matches: &clap::ArgMatches, from_file: Option<&str>) -> bool {
    let Some(from_file) = from_file else { return false };
    if let Ok(Some(value)) = matches.try_get_one::<String>("hub") {
        return matches.value_source("hub") == Some(clap::parser::ValueSource::DefaultValue) && value == from_file;
    }
    matches.subcommand().is_some_and(|(_, sub)| file_names_the_hub(sub, Some(from_file)))
}

/// `mi_option_purge_delay` in mimalloc.h's `mi_option_t` (15 in v2 and v3 alike).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// How a process that holds a fleet (`serve`, `sim`) gives memory back; called before its
/// runtime starts. Each setting is left to mimalloc when its `MIMALLOC_` variable is set.
/// - **No transparent huge pages.** mimalloc asks for them on its arenas (`MADV_HUGEPAGE`), and
///   a 2 MiB page that holds one live block stays whole in RSS. The flag is the process's
///   (inherited by what it starts, as mimalloc's own `MIMALLOC_ALLOW_THP=0` sets it).
/// - **Unused pages go back at once** (`purge_delay` 0), not a second later (mimalloc v3's
///   default): a hub's memory follows the fleet it serves, not the ramp it came through.
///
/// At 30,000 devices on 3 hubs (the cluster's runs in `git log -p benches/README.md`), a hub kept 10.2–10.7 KB a device
/// with mimalloc's defaults, 5.6–8.0 KB without huge pages, and 5.1–5.5 KB with both settings.
fn tune_allocator() {
    unsafe extern "C" {
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    }
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: the option is mimalloc's public API; it is read when pages are freed.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}

/// Logs go to stderr: `-v` info, `-vv` debug, `-vvv` trace; `RUST_LOG` overrides; warnings by default.
fn init_tracing(verbose: u8, color: mcpdev::cli::ColorChoice) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::new(log_filter(verbose, std::env::var("RUST_LOG").ok().as_deref()));
    let ansi = mcpdev::commands::output::use_color(color, std::io::IsTerminal::is_terminal(&std::io::stderr()));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}

/// Crates whose debug and trace output dumps whole frames (tokens in `initialize`, passwords in
/// CONNECT): kept at info even at -vvv, unless RUST_LOG names them.
const FRAME_DUMPERS: &[&str] = &["tungstenite", "tokio_tungstenite", "hyper", "hyper_util", "h2", "rustls", "rumqttc"];

/// The filter directives for `-v` count and `RUST_LOG`.
fn log_filter(verbose: u8, rust_log: Option<&str>) -> String {
    // rmcp logs transport failures that mcpdev reports itself; show them only with -vv.
    let base = match rust_log.map(str::trim).filter(|r| !r.is_empty()) {
        Some(r) => r.to_string(),
        None => match verbose {
            0 => return "warn,rmcp=off".into(),
            1 => return "info,rmcp=warn".into(),
            2 => "debug".into(),
            _ => "trace".into(),
        },
    };
    let named = |krate: &str| {
        base.split(',').map(|d| d.split('=').next().unwrap_or("").trim()).any(|target| target == krate || target.starts_with(&format!("{krate}::")))
    };
    let mut directives = base.clone();
    for krate in FRAME_DUMPERS.iter().filter(|k| !named(k)) {
        directives.push_str(&format!(",{krate}=info"));
    }
    directives
}

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn a_fleet_process_takes_no_huge_pages_and_purges_at_once() {
        unsafe extern "C" {
            fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
        }
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() || std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // The option is the purge delay: mimalloc v3's default for it is 1000 ms, and no other
        // option's.
        assert_eq!(unsafe { mi_option_get(super::MI_OPTION_PURGE_DELAY) }, 1000);
        super::tune_allocator();
        assert_eq!(unsafe { mi_option_get(super::MI_OPTION_PURGE_DELAY) }, 0);
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) }, 1);
    }

    /// The allocator's reading of the command line knows every global option that takes a value,
    /// so `mcpdev --color always serve` is a hub and `mcpdev --ca-file serve call x` is not.
    #[test]
    fn the_allocators_list_of_value_options_is_the_clis() {
        use clap::CommandFactory;
        let cli = mcpdev::cli::Cli::command();
        let mut takes_value: Vec<String> = cli
            .get_arguments()
            .filter(|a| a.is_global_set() && a.get_num_args().is_none_or(|n| n.takes_values()) && !matches!(a.get_action(), clap::ArgAction::SetTrue | clap::ArgAction::Count | clap::ArgAction::Help | clap::ArgAction::Version))
            .map(|a| format!("--{}", a.get_long().expect("global options are long")))
            .collect();
        takes_value.sort();
        let mut listed: Vec<String> = mcpdev::alloc::VALUE_OPTIONS.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(takes_value, listed);
        for short in cli.get_arguments().filter(|a| a.is_global_set()).filter_map(|a| a.get_short()) {
            assert!(cli.get_arguments().any(|a| a.get_short() == Some(short) && matches!(a.get_action(), clap::ArgAction::SetTrue | clap::ArgAction::Count)), "-{short} takes a value: teach mcpdev::alloc");
        }
        let fleet: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).filter(|n| mcpdev::alloc::FLEET_COMMANDS.contains(n)).collect();
        assert_eq!(fleet, mcpdev::alloc::FLEET_COMMANDS);
        assert!(cli.get_subcommands().all(|c| c.get_all_aliases().next().is_none()), "a command alias would escape mcpdev::alloc's choice");
    }

    #[test]
    fn frame_dumps_stay_out_unless_named() {
        assert_eq!(log_filter(0, None), "warn,rmcp=off");
        let trace = log_filter(3, None);
        assert!(trace.starts_with("trace,") && trace.contains(",tungstenite=info") && trace.contains(",tokio_tungstenite=info") && trace.contains(",rumqttc=info"), "{trace}");
        let named = log_filter(0, Some("debug,tungstenite=trace"));
        assert!(named.contains("tungstenite=trace") && !named.contains(",tungstenite=info") && named.contains("tokio_tungstenite=info"), "{named}");
        assert!(log_filter(0, Some("tokio_tungstenite::protocol=trace")).contains(",tungstenite=info"));
        assert!(!log_filter(0, Some("tokio_tungstenite::protocol=trace")).contains("tokio_tungstenite=info"));
        for d in log_filter(3, Some("mcpdev=debug")).split(',') {
            tracing_subscriber::EnvFilter::builder().parse(d).unwrap();
        }
    }
}
