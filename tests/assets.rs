//! The checked-in man pages and shell completions match the clap definitions.
//! When this fails: `cargo run -- generate-assets .` and commit the result.

use std::path::Path;

#[test]
fn man_pages_and_completions_are_up_to_date() {
    let fresh = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_mcpdev")).arg("generate-assets").arg(fresh.path()).status().unwrap();
    assert!(status.success());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut compared = 0;
    for dir in ["man", "completions"] {
        let mut generated: Vec<_> = std::fs::read_dir(fresh.path().join(dir)).unwrap().map(|e| e.unwrap().file_name()).collect();
        generated.sort();
        let mut checked_in: Vec<_> = std::fs::read_dir(repo.join(dir)).unwrap().map(|e| e.unwrap().file_name()).collect();
        checked_in.sort();
        assert_eq!(generated, checked_in, "{dir}/ has other files than the CLI generates: run `cargo run -- generate-assets .`");
        for name in generated {
            let new = std::fs::read(fresh.path().join(dir).join(&name)).unwrap();
            let old = std::fs::read(repo.join(dir).join(&name)).unwrap();
            assert!(new == old, "{dir}/{} is stale: run `cargo run -- generate-assets .` and commit it", name.to_string_lossy());
            compared += 1;
        }
    }
    assert!(compared >= 10, "expected man pages for every command and five shells' completions, compared {compared}");
}

#[test]
fn the_exit_code_table_is_in_help_and_man_page() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_mcpdev")).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let man = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("man/mcpdev.1")).unwrap();
    for line in mcpdev::exit::EXIT_CODES_HELP.lines().skip(1) {
        assert!(help.contains(line), "--help lacks {line:?}");
        let roff = line.replace('-', "\\-");
        assert!(man.contains(&roff), "man page lacks {line:?}");
    }
}
