//! Man pages and shell completions, from the clap definitions: `mcpdev man [COMMAND…]` and
//! `mcpdev completions SHELL` print them (as espflash and rustup do); `mcpdev generate-assets DIR`
//! (for maintainers and packagers, kept out of `--help` and the completions) writes all of them
//! to `DIR/man/` and `DIR/completions/`, which the repository keeps checked in.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::exit::{CodedError, Exit};

/// The shells completions are made for, with the file name each gets in `completions/`.
pub const SHELLS: [Shell; 5] = [Shell::Bash, Shell::Zsh, Shell::Fish, Shell::PowerShell, Shell::Elvish];

/// `mcpdev completions SHELL`: the completion script on stdout.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<()> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "mcpdev", &mut out);
    crate::exit::write_stdout(&out);
    Ok(())
}

/// `mcpdev man [COMMAND…]`: the roff man page of mcpdev or of one of its commands, on stdout
/// (`mcpdev man tools list | man -l -`).
pub fn man(args: &ManArgs) -> anyhow::Result<()> {
    let wanted = std::iter::once("mcpdev").chain(args.command.iter().map(String::as_str)).collect::<Vec<_>>().join("-");
    let pages = pages();
    let Some((_, page)) = pages.iter().find(|(name, _)| *name == wanted) else {
        let known: Vec<String> = pages.iter().filter_map(|(n, _)| n.strip_prefix("mcpdev-")).map(|n| n.replace('-', " ")).collect();
        return Err(CodedError::new(Exit::Usage, format!("no man page for `{}`", args.command.join(" ")))
            .with_help(format!("pages: mcpdev man, or mcpdev man COMMAND with one of: {}", known.join(", ")))
            .into());
    };
    let mut out = Vec::new();
    page.render(&mut out).context("rendering the man page")?;
    crate::exit::write_stdout(&out);
    Ok(())
}

/// Every man page: `mcpdev` and each visible command, as `(name, page)`; the file is `name.1`.
fn pages() -> Vec<(String, clap_mangen::Man)> {
    fn collect(cmd: clap::Command, out: &mut Vec<(String, clap_mangen::Man)>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            collect(sub, out);
        }
        let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_string();
        out.push((name, clap_mangen::Man::new(cmd)));
    }
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    collect(cmd, &mut out);
    out
}

/// Writes `man/*.1` and `completions/*` under `dir`.
pub fn write_assets(dir: &Path) -> anyhow::Result<()> {
    let man_dir = dir.join("man");
    let comp_dir = dir.join("completions");
    std::fs::create_dir_all(&man_dir).with_context(|| format!("creating {}", man_dir.display()))?;
    std::fs::create_dir_all(&comp_dir).with_context(|| format!("creating {}", comp_dir.display()))?;
    for (name, page) in pages() {
        let path = man_dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        page.render(&mut out).context("rendering a man page")?;
        std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    }
    let cmd = Cli::command();
    for shell in SHELLS {
        clap_complete::generate_to(shell, &mut cmd.clone(), "mcpdev", &comp_dir).with_context(|| format!("writing {shell} completions"))?;
    }
    Ok(())
}
