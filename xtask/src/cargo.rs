//! The controller's cargo package and binary, as xtask builds and runs it.

pub const PACKAGE: &str = "controller";
pub const BINARY: &str = "my-controller";

pub use labkit::command::cargo;
