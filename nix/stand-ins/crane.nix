# Stand-in for the crane flake: mkLib pkgs gives the functions flake.nix calls. Each checks
# its arguments (names crane knows, and the environment variables in cargoEnv) and returns a
# fake derivation carrying them. It also checks what crane would only find out while
# building: a toolchain was set, it has the target CARGO_BUILD_TARGET names, and rustfmt /
# clippy for the fmt / clippy checks.
let
  lib = import ./lib.nix;
  fake = import ./fake.nix;
  fail = msg: throw "stand-in crane: ${msg}";

  # Arguments every crane builder passes on to mkCargoDerivation / mkDerivation.
  common = [
    "src"
    "pname"
    "version"
    "name"
    "strictDeps"
    "cargoExtraArgs"
    "cargoArtifacts"
    "cargoVendorDir"
    "cargoLock"
    "cargoToml"
    "doCheck"
    "doInstallCargoArtifacts"
    "installCargoArtifactsMode"
    "nativeBuildInputs"
    "buildInputs"
    "meta"
    "passthru"
    "env"
    "preBuild"
    "postBuild"
    "preCheck"
    "postInstall"
  ];
  specific = {
    buildDepsOnly = [
      "dummySrc"
      "cargoBuildCommand"
      "cargoCheckCommand"
      "cargoCheckExtraArgs"
      "cargoTestCommand"
      "cargoTestExtraArgs"
    ];
    buildPackage = [
      "cargoBuildCommand"
      "cargoTestCommand"
      "cargoTestExtraArgs"
      "doNotRemoveReferencesToRustToolchain"
      "doNotRemoveReferencesToVendorDir"
    ];
    cargoClippy = [ "cargoClippyExtraArgs" ];
    cargoFmt = [ "rustFmtExtraArgs" ];
    cargoNextest = [
      "cargoNextestExtraArgs"
      "cargoNextestPartitionsExtraArgs"
      "partitions"
      "partitionType"
      "withLlvmCov"
    ];
  };
  # Environment variables crane hands to cargo that the flake may set. An
  # UPPER_CASE name is an environment variable, so crane takes a misspelt one
  # silently; here it fails, and a real new one is added to this list.
  cargoEnv = [
    "CARGO_BUILD_TARGET"
    "CARGO_BUILD_RUSTFLAGS"
    "CARGO_PROFILE"
    "RUSTFLAGS"
  ];
  needsArtifacts = [
    "cargoClippy"
    "cargoNextest"
  ];
  needsExtension = {
    cargoClippy = "clippy";
    cargoFmt = "rustfmt";
  };

  mkLib =
    pkgs:
    let
      make =
        toolchain:
        let
          builder =
            fn: args:
            let
              allowed = common ++ specific.${fn} ++ cargoEnv;
              unknown = builtins.filter (n: !(lib.elem n allowed)) (builtins.attrNames args);
              partitions = args.partitions or 1;
              target = args.CARGO_BUILD_TARGET or null;
              extension = needsExtension.${fn} or null;
              badStrings = builtins.filter (n: args ? ${n} && !builtins.isString args.${n}) [
                "cargoExtraArgs"
                "cargoClippyExtraArgs"
                "cargoNextestExtraArgs"
              ];
            in
            if !builtins.isAttrs args then
              fail "${fn}: takes an attribute set"
            else if unknown != [ ] then
              fail "${fn}: unknown argument(s) ${toString unknown}"
            else if !(args ? src) then
              fail "${fn}: src is required"
            else if toolchain == null then
              fail "${fn}: no toolchain: call overrideToolchain first (or crane uses nixpkgs' rustc, not rust-toolchain.toml's)"
            else if lib.elem fn needsArtifacts && !(args ? cargoArtifacts) then
              fail "${fn}: cargoArtifacts is required"
            else if target != null && !(lib.elem target toolchain.targets) then
              fail "${fn}: CARGO_BUILD_TARGET=${target} but the toolchain has targets [${toString toolchain.targets}]"
            else if extension != null && !(lib.elem extension toolchain.extensions) then
              fail "${fn}: the toolchain lacks ${extension} (rust-toolchain.toml components)"
            else if badStrings != [ ] then
              fail "${fn}: ${toString badStrings} must be strings"
            else if !(builtins.isInt partitions && partitions >= 1) then
              fail "${fn}: partitions must be a whole number of at least 1, got ${builtins.toJSON partitions}"
            else if args ? partitionType && !(lib.elem args.partitionType [ "count" "hash" ]) then
              fail "${fn}: partitionType must be count or hash"
            else
              fake "${args.pname or "crate"}-${fn}-${args.version or "0"}" (
                args
                // {
                  craneFunction = fn;
                  inherit toolchain;
                }
              );
        in
        {
          overrideToolchain =
            t:
            let
              tc = if builtins.isFunction t then t pkgs else t;
            in
            if builtins.isAttrs tc && (tc.type or null) == "derivation" then
              make tc
            else
              fail "overrideToolchain: expects a toolchain derivation or a function pkgs -> toolchain";
          buildDepsOnly = builder "buildDepsOnly";
          buildPackage = builder "buildPackage";
          cargoClippy = builder "cargoClippy";
          cargoFmt = builder "cargoFmt";
          cargoNextest = builder "cargoNextest";
        };
    in
    make null;
in
{
  inherit mkLib;
}
