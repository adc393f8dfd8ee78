//! `mcpdev remote-token create|list|revoke`: the tokens people on other machines use for the
//! control API ([`crate::hub::remote_tokens`]), kept in this machine's state directory.
//!
//! Rules: the token is printed once, on stdout (so `> file` keeps it), or written to `--out FILE`
//! (0600), and kept nowhere; stdout redirected to a file others may read is made 0600 (or, when
//! it cannot be, a warning says so). With it, when this machine's hub has its own CA (`serve --tls
//! auto`), a second line names that CA (`hub-ca-sha256 …`): the CLI on the other machine sends the
//! token only over a connection that chains to it ([`crate::links::control_token`]), so the token
//! stays bound to its hub whatever URL a file names. Names are checked before anything is written;
//! a list shows no secret; revoking a name that has no token is an error that says how to see the
//! names.

use serde_json::json;

use super::output::{print_json, render, table, text};
use crate::cli::{GlobalArgs, RemoteTokenCommand};
use crate::exit::{CodedError, Exit};
use crate::hub::remote_tokens::{self, StoreError};
use crate::links::control_token::{HUB_TOKEN_FILE_ENV, PIN_LINE};

fn coded(e: StoreError) -> CodedError {
    let exit = if matches!(e, StoreError::Io(..) | StoreError::Unreadable(..)) { Exit::Internal } else { Exit::Usage };
    CodedError::new(exit, e.to_string())
}

pub fn run(global: &GlobalArgs, command: RemoteTokenCommand) -> anyhow::Result<()> {
    let path = remote_tokens::default_path();
    match command {
        RemoteTokenCommand::Create { name, out } => {
            let (token, entry) = remote_tokens::create(&path, &name).map_err(coded)?;
            // The hub's own CA, if it has one: the token's file names it.
            let pin = crate::tls::client::read_certs(&crate::paths::hub_ca_file()).ok().and_then(|certs| certs.first().map(|c| crate::tls::fingerprint(c)));
            let text = match &pin {
                Some(pin) => format!("{token}\n{PIN_LINE} {pin}\n"),
                None => format!("{token}\n"),
            };
            let shown = match &out {
                Some(file) => {
                    crate::paths::write_owner_only(file, text.as_bytes()).map_err(|e| {
                        // The token was made but kept nowhere: withdraw it.
                        let _ = remote_tokens::revoke(&path, &entry.name);
                        CodedError::new(Exit::Usage, format!("cannot write --out {}: {e}; the token was withdrawn, nothing was kept", file.display()))
                    })?;
                    if global.json {
                        print_json(&json!({"name": entry.name, "id": entry.id(), "created": entry.created, "file": file, "hub_ca_sha256": pin}));
                    }
                    format!("it is in {} (readable by you only); copy it to the other machine, keep it 0600 there", file.display())
                }
                None => {
                    if global.json {
                        print_json(&json!({"name": entry.name, "id": entry.id(), "created": entry.created, "token": token, "hub_ca_sha256": pin}));
                    } else {
                        print!("{text}");
                    }
                    if let Some(said) = private_stdout() {
                        eprintln!("{said}");
                    }
                    "it is shown this once. On the other machine, keep it in a file only you can read (chmod 600)".to_string()
                }
            };
            if !global.quiet && !global.json {
                let bound = match &pin {
                    Some(_) => "the file names this hub's CA, and the token goes only to a hub that proves it".to_string(),
                    None => format!("this hub has no CA of its own yet (serve --tls auto makes one, {}), so give its CA there too (MCPDEV_CA_FILE)", crate::paths::hub_ca_file().display()),
                };
                eprintln!(
                    "remote token {:?} (id {}) made; {shown} and set {HUB_TOKEN_FILE_ENV} to it; {bound}; the hub accepts it over https:// only (serve --tls auto --host-tls)",
                    entry.name,
                    entry.id()
                );
            }
        }
        RemoteTokenCommand::List => {
            let tokens = remote_tokens::list(&path).map_err(coded)?;
            if global.json {
                print_json(&json!(tokens.iter().map(|e| json!({"name": e.name, "id": e.id(), "created": e.created})).collect::<Vec<_>>()));
                return Ok(());
            }
            if tokens.is_empty() {
                if !global.quiet {
                    eprintln!("no remote tokens: `mcpdev remote-token create NAME` makes one");
                }
                return Ok(());
            }
            let mut t = table(global, &["name", "id", "created"]);
            for e in &tokens {
                t.add_row([text(&e.name).into_owned(), e.id().to_string(), text(&e.created).into_owned()]);
            }
            println!("{}", render(&t));
        }
        RemoteTokenCommand::Revoke { name } => match remote_tokens::revoke(&path, &name).map_err(coded)? {
            Some(entry) => {
                if global.json {
                    print_json(&json!({"name": entry.name, "id": entry.id(), "revoked": true}));
                } else if !global.quiet {
                    println!("revoked remote token {:?} (id {}): a running hub refuses it now and ends its open connections", entry.name, entry.id());
                }
            }
            None => {
                return Err(CodedError::new(Exit::Usage, format!("no remote token is named {:?}", text(&name))).with_help("`mcpdev remote-token list` shows their names").into());
            }
        },
    }
    Ok(())
}

/// When stdout is a regular file that others may read (`create NAME > file` with a umask of 022),
/// makes it readable by its owner only and says so; says what to do when that is not possible.
/// `None`: stdout is a terminal, a pipe, or a private file already.
fn private_stdout() -> Option<String> {
    // SAFETY: fstat on fd 1 fills `st`, which is plain data; fchmod changes only that file's mode.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(1, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_mode & 0o077 == 0 {
        return None;
    }
    let was = st.st_mode & 0o777;
    if unsafe { libc::fchmod(1, st.st_mode & 0o700) } == 0 {
        Some(format!("stdout is a file others could read (mode {was:04o}): made it readable by you only (0600); `--out FILE` writes it so"))
    } else {
        Some(format!(
            "warning: stdout is a file others can read (mode {was:04o}) and this user cannot change it: chmod 600 it now, or make the token again with `--out FILE` (0600)"
        ))
    }
}
