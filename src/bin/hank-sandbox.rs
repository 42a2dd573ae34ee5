//! `hank-sandbox`: the confinement of one agent call (`hank::sandbox_main`), installed beside
//! `hank`, which starts every sandboxed agent through it.
fn main() -> std::process::ExitCode {
    hank::sandbox_main()
}
