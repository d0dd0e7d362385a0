// Empty: present so the build-dependencies (the host-side feature union) are resolved.
fn main() {}
