//! `memstrata-mcp`: the standalone Memstrata MCP server and its admin commands.
//!
//! ```text
//! memstrata-mcp [--store PATH|URL] stdio
//! memstrata-mcp [--store PATH|URL] http --listen 127.0.0.1:8765 [--api-key KEY]... [--auth-config FILE]
//! memstrata-mcp [--store PATH|URL] status | export FILE | import FILE [--knowledge-graph] | optimize [--level L]
//! ```
//! Everything lives in the library ([`memstrata_mcp::cli`]): parsing, serving, the admin
//! commands, their errors and exit statuses.

use std::process::ExitCode;

fn main() -> ExitCode {
    memstrata_mcp::cli::main()
}
