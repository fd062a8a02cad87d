{
  description = "my-controller lab kit: one dev shell for every attendee, the static controller image, checks";

  # No flake.lock is committed yet (the machines this kit was written on cannot reach the
  # hosts that serve Nix inputs), so every input is pinned to a commit right here. A
  # maintainer with network runs `nix flake lock` once and commits flake.lock; until then
  # each `nix develop` resolves these exact commits.
  inputs = {
    # nixpkgs, 2026-08-29 (nixpkgs-unstable). What was verified for this commit, and how:
    #   kubernetes / kubectl 1.36.3  - a flake-update PR that moved off this very commit
    #                                  lists kubectl 1.36.3 -> 1.37.0 (claytono/infra#2895);
    #                                  commits after ~2026-09-03 carry Kubernetes 1.37.
    #   etcd_3_6                     - 3.6.x (3.6.13 since nixpkgs#537615, 2026-07); the
    #                                  exact patch at this commit was not read.
    #   kind                         - NOT verified; most likely 0.32.x (kind v0.33.0 came
    #                                  out on 2026-08-26/27). Either works: the node image
    #                                  is the row of kind/node-images.toml for the kind
    #                                  found (v0.32 → kindest/node:v1.36.1, v0.33 →
    #                                  v1.36.4), and the shell warns about a kind with no row.
    #   etcd_3_6 on aarch64-darwin   - meta.platforms includes darwin at an older revision
    #                                  (3.6.4); not read at this commit.
    nixpkgs.url = "github:NixOS/nixpkgs/d2f67949798825fe853f7c5d0492b8bf016d3f88";

    # rust-overlay, 2026-08-22: after 892c035d (2026-08-13, "treewide: stdenv.is* ->
    # stdenv.hostPlatform.is*"), so the current nixpkgs prints no deprecation warnings
    # for it; its manifests still include Rust 1.95.0, rust-toolchain.toml's channel
    # (manifests/stable/1.95.0.nix, added 2026-04-16).
    rust-overlay = {
      url = "github:oxalica/rust-overlay/fd2ebb9cc4323d0c5a1336138dab5c3c5a5d8bd9";
      inputs.nixpkgs.follows = "nixpkgs";
    };

    # crane, 2026-08-03: the newest commit whose tree .ci/nix-check can evaluate here (no
    # GitHub), so the pin is the tree checked. crane has no flake inputs of its own (it
    # is handed `pkgs` through mkLib), so there is nothing to follow. It supports Nix
    # 2.31.2 and newer and nixpkgs 26.05 and newer (its CHANGELOG): minNix below, checked
    # by the dev shell.
    crane.url = "github:ipetkov/crane/2c71e194474d13de031d729b729c968ddbe3507f";
  };

  outputs =
    {
      self,
      nixpkgs,
      rust-overlay,
      crane,
    }:
    let
      inherit (nixpkgs) lib;

      # Everything (dev shell, controller, image, checks) on Linux. macOS gets the dev
      # shell only: nixpkgs' kube-apiserver is Linux-only, and the image is a Linux
      # (musl, static) binary, so building it on a Mac needs a Linux builder
      # (e.g. nix-darwin's linux-builder, or a remote builder).
      # No x86_64-darwin (Intel Macs): nixpkgs-unstable after the 26.05 branch-off, and so
      # the pinned commit, refuses it ("Nixpkgs 26.11 has dropped support for
      # x86_64-darwin", NixOS/nixpkgs#493096). Intel Macs take the path without Nix.
      linuxSystems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      darwinSystems = [ "aarch64-darwin" ];

      # The image tag is the crate version, read from the workspace rather than repeated.
      cargoToml = builtins.fromTOML (builtins.readFile ./Cargo.toml);
      version = cargoToml.workspace.package.version;

      # The Kubernetes minor the kit targets is chosen once: the k8s-openapi `v1_NN`
      # feature of the package that builds my-controller. The dev shell warns when its
      # kube-apiserver is of another minor (and xtask's version test would fail).
      controllerToml = builtins.fromTOML (builtins.readFile ./controller/Cargo.toml);
      k8sFeature = lib.findFirst (
        f: builtins.match "v1_[0-9]+" f != null
      ) (throw "controller/Cargo.toml: k8s-openapi has no v1_NN feature") controllerToml.dependencies.k8s-openapi.features;
      kubeMinor = "1." + lib.removePrefix "v1_" k8sFeature;

      # The kind releases the kit has a node image for (kind only guarantees the node
      # images of its own release): one table, read here and by xtask.
      kindReleases = (builtins.fromTOML (builtins.readFile ./kind/node-images.toml)).release;
      kindLines = map (r: r.kind) kindReleases;

      # The programs `cargo xtask doctor` runs, each with the arguments that print its
      # version: one list, read here and by doctor's test (xtask/doctor-tools.toml).
      doctorTools = (builtins.fromTOML (builtins.readFile ./xtask/doctor-tools.toml)).programs;

      # The oldest Nix the pinned crane supports.
      minNix = "2.31.2";

      # Static musl target for the image, per Linux system.
      muslTargets = {
        x86_64-linux = "x86_64-unknown-linux-musl";
        aarch64-linux = "aarch64-unknown-linux-musl";
      };

      # The whole repository, not only Rust sources: the tidy tests (xtask) read
      # README.md, .ci/run, kind/, manifests/ and xtask/envtest/*/go.mod (the
      # latter also through include_str!), so crane's Rust-only filter would break them.
      # (In a flake only git-tracked files are here anyway; target/ is dropped for
      # `nix-instantiate` and non-flake use. Dependencies are cached from Cargo.toml and
      # Cargo.lock alone, so other edits never rebuild them.)
      src = lib.cleanSourceWith {
        name = "my-controller-source";
        src = lib.cleanSource ./.;
        filter =
          path: _type:
          let
            relative = lib.removePrefix (toString ./. + "/") (toString path);
          in
          !(lib.elem relative [
            "target"
            ".direnv"
          ]);
      };

      perSystem =
        system:
        let
          isLinux = lib.elem system linuxSystems;
          muslTarget = muslTargets.${system} or null;

          pkgs = import nixpkgs {
            inherit system;
            overlays = [ rust-overlay.overlays.default ];
          };

          # rust-toolchain.toml (1.95.0, rustfmt + clippy) is the one source of the Rust
          # version. rust-toolchain.toml itself must not list targets (rustup on the
          # workshop machines cannot download them); the flake adds the musl one.
          mkToolchain =
            p:
            let
              fromFile = p.rust-bin.fromRustupToolchainFile ./rust-toolchain.toml;
            in
            if muslTarget == null then fromFile else fromFile.override { targets = [ muslTarget ]; };
          toolchain = mkToolchain pkgs;

          craneLib = (crane.mkLib pkgs).overrideToolchain mkToolchain;

          # Shared by every crane derivation. pname/version are given because the root
          # Cargo.toml is a virtual workspace (no [package] for crane to read).
          commonArgs = {
            inherit src version;
            pname = "my-controller";
            strictDeps = true;
          };

          # --- the controller binary, static (musl) ------------------------------
          controllerArgs = commonArgs // {
            cargoExtraArgs = "--locked -p controller --bin my-controller";
            CARGO_BUILD_TARGET = muslTarget;
            CARGO_BUILD_RUSTFLAGS = "-C target-feature=+crt-static";
            # The tests run in checks.tests, for the host target.
            doCheck = false;
          };
          controllerDeps = craneLib.buildDepsOnly controllerArgs;
          controller = craneLib.buildPackage (
            controllerArgs
            // {
              cargoArtifacts = controllerDeps;
              meta.mainProgram = "my-controller";
            }
          );

          # --- the image -----------------------------------------------------------
          # Only the static binary (its closure is itself), fixed creation date, no
          # compression: `kind load image-archive result` takes the tarball as it is.
          image = pkgs.dockerTools.buildLayeredImage {
            name = "my-controller";
            tag = version;
            contents = [ controller ];
            created = "1970-01-01T00:00:01Z";
            compressor = "none";
            config = {
              Entrypoint = [ "/bin/my-controller" ];
              User = "65532:65532";
              ExposedPorts."8080/tcp" = { };
            };
          };

          # --- checks: the host target, the whole workspace ------------------------
          # The dev profile, as `cargo test` builds: debug assertions and overflow checks
          # stay on, and the build takes a quarter of a release build's CPU (docs/nix.md).
          checkArgs = commonArgs // {
            CARGO_PROFILE = "dev";
          };
          workspaceDeps = craneLib.buildDepsOnly checkArgs;
          checks = {
            fmt = craneLib.cargoFmt commonArgs;
            clippy = craneLib.cargoClippy (
              checkArgs
              // {
                cargoArtifacts = workspaceDeps;
                cargoClippyExtraArgs = "--workspace --all-targets -- -D warnings";
              }
            );
            # What `cargo maint test` runs before it starts a lab: every test except the
            # e2e crate's integration tests, which need a running cluster, and the one
            # that compares the tidy checks' walk of the tree with git (no .git here).
            # xtask's lab tests are `test = false` targets: nextest does not build them.
            # .ci/sandbox-check runs this very command as this sandbox would.
            # curl: xtask's test of envtest's release download fetches from a server on loopback.
            tests = craneLib.cargoNextest (
              checkArgs
              // {
                cargoArtifacts = workspaceDeps;
                nativeBuildInputs = [ pkgs.curl ];
                cargoNextestExtraArgs = "--workspace -E 'not (package(e2e) and kind(test)) and not test(=tidy::tree::the_walk_lists_what_git_tracks_or_would)'";
                partitions = 1;
                partitionType = "count";
              }
            );
            # Building them is a check too.
            inherit controller image;
          };

          # --- the dev shell ---------------------------------------------------------
          # kube-apiserver and etcd in one directory, as envtest expects
          # (KUBEBUILDER_ASSETS), and on PATH; xtask finds them either way.
          envtestAssets = pkgs.linkFarm "envtest-assets-${kubeMinor}" [
            {
              name = "bin/kube-apiserver";
              path = "${pkgs.kubernetes}/bin/kube-apiserver";
            }
            {
              name = "bin/etcd";
              path = "${pkgs.etcd_3_6}/bin/etcd";
            }
          ];

          # The package that gives each program `cargo xtask doctor` runs
          # (xtask/doctor-tools.toml). On macOS nixpkgs builds etcd but not
          # kube-apiserver (Linux-only): xtask builds that one itself, with Go.
          # No Docker engine: dockerd needs root and a system service, which a shell
          # cannot give; the engine comes from the system (Docker Engine, Docker
          # Desktop), the client from here. The envtest lab needs no Docker.
          toolPackages = {
            rustc = toolchain;
            cc = pkgs.stdenv.cc;
            git = pkgs.git;
            kubectl = pkgs.kubectl;
            go = pkgs.go;
            kind = pkgs.kind;
            docker = pkgs.docker-client;
            # doctor probes the network with it.
            curl = pkgs.curl;
            etcd = if isLinux then envtestAssets else pkgs.etcd_3_6;
          }
          // lib.optionalAttrs isLinux {
            kube-apiserver = envtestAssets;
            gcc = pkgs.gcc;
          };
          doctorPrograms = lib.filterAttrs (_: p: isLinux || !(p.linux_only or false)) doctorTools;
          missingTools = lib.filter (n: !(toolPackages ? ${n})) (lib.attrNames doctorPrograms);
          shellPackages =
            if missingTools != [ ] then
              throw "xtask/doctor-tools.toml: doctor runs ${toString missingTools}, which the dev shell on ${system} does not provide (flake.nix, toolPackages)"
            else
              lib.unique (map (n: toolPackages.${n}) (lib.attrNames doctorPrograms)) ++ [ pkgs.cargo-nextest ];
          # `PROGRAM ARGS...` that prints each one's version (doctor-tools.toml: plain words).
          versionCommands = lib.mapAttrs (n: p: lib.concatStringsSep " " ([ n ] ++ p.version)) doctorPrograms;

          # The dev shell has every program doctor runs: each one run, in a build with
          # the shell's packages only.
          devshellTools = pkgs.runCommand "devshell-tools" { nativeBuildInputs = shellPackages; } ''
            ${lib.concatStrings (
              lib.mapAttrsToList (n: cmd: ''
                command -v ${n} >/dev/null || { echo "the dev shell has no ${n} (xtask/doctor-tools.toml)"; exit 1; }
                echo "\$ ${cmd}"
                ${cmd} || { echo "the dev shell's ${n} does not run: ${cmd} failed"; exit 1; }
              '') versionCommands
            )}
            touch $out
          '';

          devShell = pkgs.mkShell (
            {
              packages = shellPackages;

              # xtask checks this to know it runs inside `nix develop`.
              LAB_KIT_NIX_SHELL = "1";

              shellHook = ''
                echo "my-controller lab kit: Nix dev shell (nixpkgs ${nixpkgs.shortRev or "unpinned"}, ${system})"
                __lab_kit_show() { printf '  %-15s %s\n' "$1" "$("''${@:2}" 2>/dev/null | head -n 1 || true)"; }
                __lab_kit_show nix nix --version
                __lab_kit_show cargo-nextest cargo nextest --version
                ${lib.concatStrings (lib.mapAttrsToList (n: cmd: "__lab_kit_show ${n} ${cmd}\n") versionCommands)}
                echo "  (docker: the client only; the engine is the system's: Docker Engine or Docker Desktop, needed by the kind lab, not by envtest)"
                ${lib.optionalString isLinux ''
                  case "$(kube-apiserver --version 2>/dev/null)" in
                    *"v${kubeMinor}."*) ;;
                    *) echo "  warning: kube-apiserver is not ${kubeMinor}.x, the version k8s-openapi is built for (controller/Cargo.toml)" ;;
                  esac
                ''}
                ${lib.optionalString (!isLinux) ''
                  echo "  (macOS: xtask builds kube-apiserver with Go; the image needs a Linux builder: nix build .#packages.aarch64-linux.image)"
                ''}
                __lab_kit_nix="$(nix --version 2>/dev/null | awk '{print $NF}')"
                if [ -n "$__lab_kit_nix" ] && [ "$(printf '%s\n' ${minNix} "$__lab_kit_nix" | sort -V | head -n 1)" != ${minNix} ]; then
                  echo "  warning: Nix $__lab_kit_nix is older than ${minNix}, the oldest the pinned crane supports: upgrade Nix (README, Nix)"
                fi
                __lab_kit_kind="$(kind version 2>/dev/null | awk '{print $2}')"
                case "''${__lab_kit_kind%.*}" in
                  ${lib.concatStringsSep "|" kindLines}) ;;
                  *) echo "  warning: kind $__lab_kit_kind has no node image in kind/node-images.toml (kind ${lib.concatStringsSep ", " kindLines}): cargo xtask lab up will refuse it" ;;
                esac
                unset __lab_kit_nix __lab_kit_kind
                unset -f __lab_kit_show
                echo
                echo "next: cargo xtask lab up"
              '';
            }
            // lib.optionalAttrs isLinux {
              KUBEBUILDER_ASSETS = "${envtestAssets}/bin";
            }
          );
        in
        {
          inherit devShell;
          packages = lib.optionalAttrs isLinux {
            inherit controller image;
            default = controller;
          };
          checks = {
            devshell-tools = devshellTools;
          }
          // lib.optionalAttrs isLinux checks;
          # `nix fmt`: nixfmt (RFC 166 style) over the whole tree, through treefmt.
          formatter = pkgs.nixfmt-tree;
        };

      allSystems = lib.genAttrs (linuxSystems ++ darwinSystems) perSystem;
      linuxOnly = lib.genAttrs linuxSystems (system: allSystems.${system});
    in
    {
      devShells = lib.mapAttrs (_: s: { default = s.devShell; }) allSystems;
      # No packages on macOS: the image (and the static binary in it) needs a Linux
      # builder; its only check is the dev shell's toolbox.
      packages = lib.mapAttrs (_: s: s.packages) linuxOnly;
      checks = lib.mapAttrs (_: s: s.checks) allSystems;
      formatter = lib.mapAttrs (_: s: s.formatter) allSystems;
    };
}
