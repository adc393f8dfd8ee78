//! `mcpdev generate-assets DIR`: man pages and shell completions from the clap definitions.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

pub fn run(args: &crate::cli::GenerateArgs) -> anyhow::Result<()> {
    write_assets(&args.out_dir)
}

/// Writes `man/*.1` and `completions/*` under `dir`.
pub fn write_assets(dir: &Path) -> anyhow::Result<()> {
    let man_dir = dir.join("man");
    let comp_dir = dir.join("completions");
    std::fs::create_dir_all(&man_dir).with_context(|| format!("creating {}", man_dir.display()))?;
    std::fs::create_dir_all(&comp_dir).with_context(|| format!("creating {}", comp_dir.display()))?;
    let cmd = Cli::command();
    clap_mangen::generate_to(cmd.clone(), &man_dir).context("writing man pages")?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish, Shell::PowerShell, Shell::Elvish] {
        clap_complete::generate_to(shell, &mut cmd.clone(), "mcpdev", &comp_dir)
            .with_context(|| format!("writing {shell} completions"))?;
    }
    Ok(())
}
