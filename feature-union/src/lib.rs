//! Empty on purpose: this crate only carries dependency features (see Cargo.toml).
