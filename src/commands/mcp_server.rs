//! The MCP server a command reaches instead of a device (`--url`, `--stdio`), and its failures
//! as exit codes.
//!
//! Rules:
//! - Failures map to the exit codes a device's do: refused credentials 3, unreachable (a server
//!   that exited, a refused connection) 4, a JSON-RPC error or an answer too large to read 5,
//!   no answer in time 6.
//! - `--stdio` with no command takes mcpdev.toml's `[stdio]` (its `env` too); `--stdio-env`
//!   comes on top.

use crate::cli::McpServerArgs;
use crate::exit::{CodedError, Exit};
use crate::links::mcp::stdio::StdioCommand;
use crate::links::mcp::{McpConnection, McpEndpoint, McpFailure};

/// The server the arguments name, if they name one.
pub fn endpoint(args: &McpServerArgs) -> Result<Option<McpEndpoint>, CodedError> {
    if let Some(url) = &args.url {
        let headers = crate::links::mcp::parse_headers(&args.headers).map_err(|e| CodedError::new(Exit::Usage, e))?;
        return Ok(Some(McpEndpoint::Url { url: url.clone(), headers, transport: args.transport }));
    }
    let Some(line) = &args.stdio else { return Ok(None) };
    let mut env: Vec<String> = Vec::new();
    let line = if line.trim().is_empty() {
        let cfg = crate::config::load().map_err(|e| CodedError::new(Exit::Usage, e))?;
        let Some(stdio) = cfg.stdio else {
            return Err(CodedError::new(Exit::Usage, "--stdio was given no command, and mcpdev.toml has no [stdio] command")
                .with_help("--stdio \"npx -y @modelcontextprotocol/server-everything\", or [stdio] command = \"…\" in mcpdev.toml"));
        };
        env.extend(stdio.env.iter().map(|(k, v)| format!("{k}={v}")));
        stdio.command
    } else {
        line.clone()
    };
    env.extend(args.stdio_env.iter().cloned());
    let cmd = StdioCommand::parse(&line, &env).map_err(|e| CodedError::new(Exit::Usage, e))?;
    Ok(Some(McpEndpoint::Stdio(cmd)))
}

/// A failure talking to an MCP server, with its exit code.
pub fn failure(e: McpFailure) -> CodedError {
    let exit = match &e {
        McpFailure::Auth(_) => Exit::Auth,
        McpFailure::Timeout(_) => Exit::Timeout,
        McpFailure::Rpc { .. } | McpFailure::TooLarge(_) => Exit::ToolError,
        McpFailure::Unreachable(_) => Exit::Unreachable,
    };
    let message = match &e {
        McpFailure::Timeout(d) => format!("the MCP server did not answer within {d:?}"),
        _ => e.to_string(),
    };
    CodedError::new(exit, message)
}

/// Connects to the server the arguments name; a usage error when they name none.
pub async fn connect(args: &crate::cli::ServerArgs, command: &str) -> anyhow::Result<(McpConnection, McpEndpoint)> {
    let Some(endpoint) = endpoint(&args.server)? else {
        return Err(CodedError::new(Exit::Usage, format!("`mcpdev {command}` talks to an MCP server: name one with --url URL or --stdio \"COMMAND\"")).into());
    };
    let conn = McpConnection::connect(&endpoint, args.timeout).await.map_err(failure)?;
    Ok((conn, endpoint))
}
