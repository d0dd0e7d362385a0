//! `uniffi-bindgen` at exactly the uniffi version the workspace links, so the
//! generated Swift/Kotlin always match the scaffolding in `libmemstrata_ffi`.
//! Used by `bindings-swift/scripts/generate.sh` (library mode).

fn main() {
    uniffi::uniffi_bindgen_main()
}
