//! [`CliError`]: why a command failed. `memstrata-mcp` prints it after
//! `memstrata-mcp: ` on stderr and exits with status 1, whatever the kind.

/// A command's failure, by kind; the message names the flag, file or store concerned.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A flag, a file a flag names, or the listen address is not usable.
    #[error("{0}")]
    Config(String),
    /// No store where one must already exist, or the store could not be opened.
    #[error("{0}")]
    Store(String),
    /// The engine failed an operation on an open store.
    #[error(transparent)]
    Memory(#[from] memstrata::Error),
    /// An export, import or optimization through the bindings' shared helpers failed.
    #[error(transparent)]
    Binding(#[from] memstrata_bindings_common::BindingError),
    /// A file could not be opened or read.
    #[error("{what}: {source}")]
    File {
        /// What was being done, naming the file.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Writing the command's output (stdout) failed.
    #[error(transparent)]
    Output(#[from] std::io::Error),
    /// Setting up the process (runtime, signal handlers) or serving MCP failed.
    #[error("{0}")]
    Serve(String),
}

impl CliError {
    /// A [`CliError::File`] for `source`, described as `what`.
    pub(crate) fn file(what: impl Into<String>, source: std::io::Error) -> Self {
        CliError::File {
            what: what.into(),
            source,
        }
    }
}

/// A command's result.
pub type CliResult<T> = Result<T, CliError>;
