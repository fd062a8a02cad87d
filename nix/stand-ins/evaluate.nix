# What .ci/nix-check evaluates besides `nix flake check`: flake.nix's outputs, called with
# the real rust-overlay and crane trees and the stand-in package set (./nixpkgs on the real
# nixpkgs lib) as Nix would hand them to `outputs`, then checked for what the kit relies
# on. The result is the list of what was checked; any failure is a `throw` naming it.
#
# The arguments are the three input folders (.ci/nix-check unpacks and assembles them).
{
  nixpkgsDir,
  rustOverlayDir,
  craneDir,
}:
let
  root = ../..;
  flake = import (root + "/flake.nix");
  lib = import (nixpkgsDir + "/lib");
  inherit (builtins)
    attrNames
    attrValues
    elem
    elemAt
    filter
    isAttrs
    match
    substring
    ;

  fail = msg: throw "nix-check: FAILED: ${msg}";
  # `check cond msg`: msg states what must hold; it is the report line when it does.
  check = cond: msg: if cond then "ok  ${msg}" else fail msg;
  contains = infix: s: builtins.isString s && (builtins.split (escape infix) s) != [ s ];
  escape = s: builtins.replaceStrings [ "(" ")" "[" "]" "." "*" "+" "?" "{" "}" "|" "^" "$" "\\" ] [ "\\(" "\\)" "\\[" "\\]" "\\." "\\*" "\\+" "\\?" "\\{" "\\}" "\\|" "\\^" "\\$" "\\\\" ] s;
  short = rev: substring 0 8 rev;

  cargoVersion = (builtins.fromTOML (builtins.readFile (root + "/Cargo.toml"))).workspace.package.version;
  kindLines = map (r: r.kind) (builtins.fromTOML (builtins.readFile (root + "/kind/node-images.toml"))).release;
  # crane's minimum, as the flake states it.
  minNix = "2.31.2";
  rustChannel = (builtins.fromTOML (builtins.readFile (root + "/rust-toolchain.toml"))).toolchain.channel;
  # The programs `cargo xtask doctor` runs (its test keeps the list true).
  doctorTools = (builtins.fromTOML (builtins.readFile (root + "/xtask/doctor-tools.toml"))).programs;

  linuxSystems = [
    "x86_64-linux"
    "aarch64-linux"
  ];
  darwinSystems = [ "aarch64-darwin" ];
  systems = linuxSystems ++ darwinSystems;
  muslTarget = {
    x86_64-linux = "x86_64-unknown-linux-musl";
    aarch64-linux = "aarch64-unknown-linux-musl";
  };

  # --- the inputs: each pinned to a commit; rust-overlay follows nixpkgs ---------------
  pin =
    name:
    let
      url = flake.inputs.${name}.url or (fail "flake input ${name} has no url");
      m = match "github:([^/]+)/([^/]+)/([0-9a-f]{40})" url;
    in
    if m == null then
      fail "flake input ${name} is pinned to a 40-hex commit (url is ${url})"
    else
      {
        inherit url;
        rev = elemAt m 2;
      };
  pins = lib.genAttrs [ "nixpkgs" "rust-overlay" "crane" ] pin;

  inputLines = [
    (check (attrNames flake.inputs == [
      "crane"
      "nixpkgs"
      "rust-overlay"
    ]) "flake inputs are exactly crane, nixpkgs, rust-overlay")
    (check (
      (flake.inputs.rust-overlay.inputs.nixpkgs.follows or null) == "nixpkgs"
    ) "rust-overlay follows nixpkgs")
    (check (!(flake.inputs.crane ? inputs)) "crane has no follows (it has no inputs of its own)")
    "ok  pins: nixpkgs ${short pins.nixpkgs.rev}, rust-overlay ${short pins.rust-overlay.rev}, crane ${short pins.crane.rev} (40-hex commits)"
  ];

  # --- the inputs, as Nix hands them to `outputs` --------------------------------------
  # A flake input: its own outputs (given `self` and its inputs), its tree and its rev.
  input =
    dir: rev: inputs:
    let
      self =
        (import (dir + "/flake.nix")).outputs (inputs // { inherit self; })
        // {
          outPath = dir;
          inherit rev;
          shortRev = substring 0 7 rev;
        };
    in
    self;
  nixpkgs = input nixpkgsDir pins.nixpkgs.rev { };
  rust-overlay = input rustOverlayDir pins.rust-overlay.rev { inherit nixpkgs; };
  crane = input craneDir pins.crane.rev { };
  self = {
    outPath = toString root;
  };

  outputs = flake.outputs {
    inherit
      self
      nixpkgs
      rust-overlay
      crane
      ;
  };

  get =
    path:
    builtins.foldl' (
      acc: key: if acc != null && isAttrs acc && acc ? ${key} then acc.${key} else null
    ) outputs path;
  need =
    path:
    let
      v = get path;
    in
    if v == null then fail "${builtins.concatStringsSep "." path} exists" else v;
  isDrv = lib.isDerivation;
  pnames = map (p: p.pname or p.name);
  # rust-overlay's toolchain among a derivation's inputs (its passthru names what it has),
  # and the components it is made of (rustc, cargo, rust-std, clippy-preview, …) with
  # the target each is for.
  toolchainIn =
    what: inputs:
    lib.findFirst (p: p ? availableComponents) (fail "${what} has rust-overlay's toolchain (rust-toolchain.toml)") inputs;
  components = toolchain: map (c: c.name) toolchain.paths;
  hasComponent = toolchain: prefix: lib.any (lib.hasPrefix prefix) (components toolchain);

  # --- per system ---------------------------------------------------------------------------
  shellLines =
    system:
    let
      isLinux = elem system linuxSystems;
      shell = need [
        "devShells"
        system
        "default"
      ];
      packages = shell.nativeBuildInputs or [ ];
      pkgNames = pnames packages;
      toolchain = toolchainIn "devShells.${system}.default" packages;
      farm = lib.findFirst (p: p ? entries) null packages;
      farmNames = if farm == null then [ ] else map (e: e.name) farm.entries;
      hook = shell.shellHook or "";
      devshellTools = get [
        "checks"
        system
        "devshell-tools"
      ];
      # kube-apiserver is Linux-only in nixpkgs: on macOS xtask builds it with Go.
      toolCommands = lib.mapAttrsToList (n: p: lib.concatStringsSep " " ([ n ] ++ p.version)) (
        lib.filterAttrs (_: p: isLinux || !(p.linux_only or false)) doctorTools
      );
      formatter = get [
        "formatter"
        system
      ];
    in
    [
      (check (isDrv shell) "devShells.${system}.default is a derivation")
      (check (
        toolchain.version == rustChannel
      ) "devShells.${system}.default: Rust ${toolchain.version} from rust-toolchain.toml: ${toString (components toolchain)}")
      (check (
        hasComponent toolchain "clippy-" && hasComponent toolchain "rustfmt-"
      ) "devShells.${system}.default: the toolchain has clippy and rustfmt")
      (check (lib.findFirst (n: !(elem n pkgNames)) null [
        "cargo-nextest"
        "kind"
        "kubectl"
        "docker"
        "go"
      ] == null) "devShells.${system}.default: cargo-nextest, kind, kubectl, docker-client, go")
      (check (
        devshellTools != null
        && isDrv devshellTools
        && pnames (devshellTools.nativeBuildInputs or [ ]) == pkgNames
        && lib.findFirst (c: !(contains c (devshellTools.buildCommand or ""))) null toolCommands == null
        && lib.findFirst (c: !(contains c hook)) null toolCommands == null
      ) "checks.${system}.devshell-tools runs, with the dev shell's packages only, and the shellHook prints, every program doctor runs (xtask/doctor-tools.toml): ${lib.concatStringsSep ", " toolCommands}")
      (check ((shell.LAB_KIT_NIX_SHELL or null) == "1") "devShells.${system}.default: LAB_KIT_NIX_SHELL=1")
      (check (
        contains "the client only" hook
      ) "devShells.${system}.default: the shellHook says the Docker engine is not in the shell")
      (check (
        formatter != null && isDrv formatter && (formatter.pname or "") == "nixfmt-tree"
      ) "formatter.${system}: nixfmt-tree (nixfmt, RFC 166 style, over the tree)")
      (check (
        contains "cargo xtask lab up" hook
        && lib.findFirst (t: !(contains t hook)) null [
          "nix --version"
          "rustc --version"
          "cargo nextest --version"
          "kind version"
          "kubectl version --client"
          "docker --version"
        ] == null
      ) "devShells.${system}.default: the shellHook prints nix, rustc, cargo-nextest, kind, kubectl, docker versions and `cargo xtask lab up`")
      (check (
        contains "sort -V" hook && contains minNix hook
      ) "devShells.${system}.default: the shellHook warns below Nix ${minNix} (crane's minimum)")
      (check (
        lib.findFirst (l: !(contains l hook)) null kindLines == null && contains "kind/node-images.toml" hook
      ) "devShells.${system}.default: the shellHook accepts the kind releases of kind/node-images.toml (${toString kindLines})")
    ]
    ++ (
      if isLinux then
        [
          (check (
            farm != null && elem "bin/kube-apiserver" farmNames && elem "bin/etcd" farmNames
          ) "devShells.${system}.default: kube-apiserver and etcd in one directory, on PATH")
          (check (
            (shell.KUBEBUILDER_ASSETS or null) == "${farm}/bin"
          ) "devShells.${system}.default: KUBEBUILDER_ASSETS is that directory")
          (check (
            contains "kube-apiserver --version" hook && contains "etcd --version" hook
          ) "devShells.${system}.default: the shellHook prints kube-apiserver and etcd versions")
        ]
      else
        [
          (check (
            !(shell ? KUBEBUILDER_ASSETS) && farm == null && !(elem "kubernetes" pkgNames)
          ) "devShells.${system}.default: no kube-apiserver (nixpkgs builds it for Linux only)")
          (check (
            elem "etcd" pkgNames && contains "etcd --version" hook
          ) "devShells.${system}.default: etcd (nixpkgs builds it for darwin), its version printed")
          (check (
            contains "nix build .#packages.aarch64-linux.image" hook
          ) "devShells.${system}.default: the shellHook names the image's Linux-builder path")
        ]
    );

  linuxLines =
    system:
    let
      controller = need [
        "packages"
        system
        "controller"
      ];
      deps = controller.cargoArtifacts or (fail "packages.${system}.controller has cargoArtifacts");
      image = need [
        "packages"
        system
        "image"
      ];
      checks = need [
        "checks"
        system
      ];
      clippy = need [
        "checks"
        system
        "clippy"
      ];
      fmt = need [
        "checks"
        system
        "fmt"
      ];
      tests = need [
        "checks"
        system
        "tests"
      ];
      target = muslTarget.${system};
      buildToolchain = toolchainIn "packages.${system}.controller" controller.nativeBuildInputs;
      # crane's cargo command lines (its build and check phases).
      commands = d: "${d.buildPhase or ""}\n${d.checkPhase or ""}";
    in
    [
      (check (
        deps.name == "my-controller-deps-${cargoVersion}"
        && controller.name == "my-controller-${cargoVersion}"
      ) "packages.${system}.controller: crane's buildDepsOnly (${deps.name}), then buildPackage (${controller.name})")
      (check (
        contains "-p controller --bin my-controller" (commands controller)
        && contains "-p controller --bin my-controller" (commands deps)
      ) "packages.${system}.controller: cargo build --locked -p controller --bin my-controller (the deps built with the same arguments)")
      (check (
        controller.CARGO_BUILD_TARGET or null == target
        && deps.CARGO_BUILD_TARGET or null == target
        && hasComponent buildToolchain "rust-std-${rustChannel}-${target}"
      ) "packages.${system}.controller: CARGO_BUILD_TARGET=${target}, and the toolchain crane builds with has its rust-std")
      (check (contains "+crt-static" (
        controller.CARGO_BUILD_RUSTFLAGS or ""
      )) "packages.${system}.controller: static (${controller.CARGO_BUILD_RUSTFLAGS or ""})")
      (check (image.imageName == "my-controller") "packages.${system}.image: name my-controller")
      (check (
        image.imageTag == cargoVersion
      ) "packages.${system}.image: tag ${image.imageTag} = Cargo.toml [workspace.package] version")
      (check (
        image.compressor == "none" && match ".*\\.tar" image.name != null
      ) "packages.${system}.image: uncompressed tarball (${image.name}) for `kind load image-archive`")
      (check (image.contents == [ controller ]) "packages.${system}.image: contents = the controller binary only")
      (check (
        image.config.Entrypoint == [ "/bin/my-controller" ]
        || image.config.Entrypoint == [ "${controller}/bin/my-controller" ]
      ) "packages.${system}.image: Entrypoint runs my-controller")
      (check (image.config.User == "65532:65532") "packages.${system}.image: User 65532:65532")
      (check (
        image ? created && image.created != "now"
      ) "packages.${system}.image: fixed creation date ${image.created}")
      (check (image.config.ExposedPorts ? "8080/tcp") "packages.${system}.image: exposes 8080/tcp")
      (check (
        contains "clippy --locked --workspace --all-targets -- -D warnings" (commands clippy)
        && hasComponent (toolchainIn "checks.${system}.clippy" clippy.nativeBuildInputs) "clippy-"
      ) "checks.${system}.clippy: cargo clippy --locked --workspace --all-targets -- -D warnings, with the toolchain's clippy")
      (check (
        contains "cargo fmt" (commands fmt)
        && hasComponent (toolchainIn "checks.${system}.fmt" fmt.nativeBuildInputs) "rustfmt-"
      ) "checks.${system}.fmt: cargo fmt --check, with the toolchain's rustfmt")
      (check (
        contains "cargo nextest run" (commands tests)
        && contains "--workspace" (commands tests)
        && contains "package(e2e)" (commands tests)
        && (tests.CARGO_PROFILE or null) == "dev"
        && (tests.cargoArtifacts.CARGO_PROFILE or null) == "dev"
        && builtins.elem "curl" (pnames (tests.nativeBuildInputs or [ ]))
      ) "checks.${system}.tests: cargo nextest run --cargo-profile dev --workspace, on dependencies built in that profile, not the e2e crate's cluster tests, curl on PATH (.ci/sandbox-check runs the same command)")
      (check (
        filter (c: c ? CARGO_BUILD_TARGET) [
          clippy
          fmt
          tests
        ] == [ ]
      ) "checks.${system}.{clippy,fmt,tests}: host target (no CARGO_BUILD_TARGET)")
      (check (
        lib.findFirst (c: !isDrv c) null (builtins.attrValues checks) == null
      ) "checks.${system}: ${toString (attrNames checks)}")
    ];

  darwinLines = system: [
    (check (
      !((get [ "packages" system ]) != null && (get [ "packages" system "image" ]) != null)
    ) "packages.${system}: no image (it needs a Linux builder)")
    (check (
      attrNames (need [ "checks" system ]) == [ "devshell-tools" ]
    ) "checks.${system}: devshell-tools only (no builds of the Linux image)")
  ];

  lines =
    inputLines
    ++ [
      (check (
        attrNames (need [ "devShells" ]) == builtins.sort builtins.lessThan systems
      ) "devShells for ${toString systems}")
      (check (
        attrNames (need [ "packages" ]) == builtins.sort builtins.lessThan linuxSystems
      ) "packages for ${toString linuxSystems} only")
      (check (
        attrNames (need [ "checks" ]) == builtins.sort builtins.lessThan systems
        && attrNames (need [ "formatter" ]) == builtins.sort builtins.lessThan systems
      ) "checks and formatter for ${toString systems}")
    ]
    ++ builtins.concatMap shellLines systems
    ++ builtins.concatMap linuxLines linuxSystems
    ++ builtins.concatMap darwinLines darwinSystems;
in
# Every output's derivation is instantiated first (a typo anywhere in flake.nix surfaces).
builtins.deepSeq (map (d: d.drvPath) (
  lib.concatMap (set: lib.concatMap attrValues (attrValues set)) [
    outputs.devShells
    outputs.packages
    outputs.checks
  ]
  ++ attrValues outputs.formatter
)) lines
