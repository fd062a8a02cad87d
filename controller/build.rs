//! Reads the Kubernetes version that k8s-openapi was built for (its `v1_*`
//! feature, chosen once in Cargo.toml) and hands it to the code as
//! `K8S_TARGET_MAJOR`/`K8S_TARGET_MINOR`, so no second hand-written constant exists.
//! k8s-openapi publishes it as `DEP_K8S_OPENAPI_<its version>_VERSION`, e.g.
//! 74752 = 0x0001_2400 for 1.36.

fn main() {
    let (name, value) = std::env::vars()
        .find(|(k, _)| k.starts_with("DEP_K8S_OPENAPI_") && k.ends_with("_VERSION"))
        .expect(
            "k8s-openapi did not publish DEP_K8S_OPENAPI_*_VERSION: is it a direct dependency?",
        );
    let packed: u32 = value.parse().unwrap_or_else(|_| panic!("{name}={value} is not a number"));
    let (major, minor) = (packed >> 16, (packed >> 8) & 0xff);
    println!("cargo::rustc-env=K8S_TARGET_MAJOR={major}");
    println!("cargo::rustc-env=K8S_TARGET_MINOR={minor}");
    println!("cargo::rerun-if-env-changed={name}");
}
