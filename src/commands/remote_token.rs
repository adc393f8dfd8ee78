//! `mcpdev remote-token create|list|revoke`: the tokens people on other machines use for the
//! control API ([`crate::hub::remote_tokens`]), kept in this machine's state directory.
//!
//! Rules: the token is printed once, on stdout (so `> file` keeps it), and kept nowhere; with it,
//! when this machine's hub has its own CA (`serve --tls auto`), a second line names that CA
//! (`hub-ca-sha256 …`): the CLI on the other machine sends the token only over a connection
//! that chains to it ([`crate::links::control_token`]), so the token stays bound to its hub
//! whatever URL a file names. Names are checked before anything is written; a list shows no
//! secret; revoking a name that has no token is an error that says how to see the names.

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
        RemoteTokenCommand::Create { name } => {
            let (token, entry) = remote_tokens::create(&path, &name).map_err(coded)?;
            // The hub's own CA, if it has one: the token's file names it.
            let pin = crate::tls::client::read_certs(&crate::paths::hub_ca_file()).ok().and_then(|certs| certs.first().map(|c| crate::tls::fingerprint(c)));
            if global.json {
                print_json(&json!({"name": entry.name, "id": entry.id(), "created": entry.created, "token": token, "hub_ca_sha256": pin}));
            } else {
                println!("{token}");
                if let Some(pin) = &pin {
                    println!("{PIN_LINE} {pin}");
                }
            }
            if !global.quiet && !global.json {
                let bound = match &pin {
                    Some(_) => "the file names this hub's CA, and the token goes only to a hub that proves it".to_string(),
                    None => format!("this hub has no CA of its own yet (serve --tls auto makes one, {}), so give its CA there too (MCPDEV_CA_FILE)", crate::paths::hub_ca_file().display()),
                };
                eprintln!(
                    "remote token {:?} (id {}) made; it is shown this once. On the other machine, keep it in a file only you can read (chmod 600) \
                     and set {HUB_TOKEN_FILE_ENV} to it; {bound}; the hub accepts it over https:// only (serve --tls auto --host-tls)",
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
            let mut t = table(global, &["NAME", "ID", "CREATED"]);
            for e in &tokens {
                t.add_row([text(&e.name).into_owned(), e.id().to_string(), text(&e.created).into_owned()]);
            }
            print!("{}", render(&t));
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
