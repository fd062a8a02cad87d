//! `cargo xtask`: the verbs are the library's (`src/lib.rs`).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    xtask::main().await
}
