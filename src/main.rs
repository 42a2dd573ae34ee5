fn main() -> std::process::ExitCode {
    hank::main()
}
