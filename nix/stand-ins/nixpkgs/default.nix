# Stand-in for the nixpkgs package set (`import nixpkgs { system; overlays; }`), which
# cannot be had on the machines this kit is checked on. It is built on nixpkgs' real
# `lib` (unpacked beside this file by .ci/nix-check) and gives the real rust-overlay and
# crane what they ask of a package set: platforms from `lib.systems.elaborate`,
# `stdenv.mkDerivation`, `callPackage`, splicing, fetchers and builders. Every derivation
# is a real one (`builtins.derivation`: `nix flake check --no-build` instantiates it),
# with a builder that refuses to run: nothing here can be built, and packages are
# placeholders, not what nixpkgs has. What nixpkgs would only find out while building
# (an unknown mkShell argument, a bad image config) is checked here by name.
{
  system ? localSystem.system,
  localSystem ? {
    inherit system;
  },
  overlays ? [ ],
  config ? { },
  ...
}:
let
  lib = import ./lib;
  fail = msg: throw "stand-in nixpkgs (${system}): ${msg}";
  platform = lib.systems.elaborate system;
  inherit (platform) isLinux isDarwin;
  isDrv = lib.isDerivation;

  builder = "/bin/sh";
  refuse = [
    "-c"
    "echo 'stand-in nixpkgs: this derivation cannot be built (see docs/nix.md)' >&2; exit 1"
  ];

  # nixpkgs' mkDerivation, as far as evaluation goes: attrs or a function of the final
  # attrs, `env`, `passthru`, `meta`, `overrideAttrs`; lists, bools and null become
  # environment variables the way nixpkgs makes them.
  mkDerivation = fnOrAttrs: mkDerivationFrom (lib.toExtension fnOrAttrs { });
  mkDerivationFrom =
    argsFn:
    let
      args = lib.fix argsFn;
      name =
        args.name or (
          if args ? pname then
            "${args.pname}${lib.optionalString (args ? version) "-${args.version}"}"
          else
            fail "mkDerivation: neither name nor pname given"
        );
      nonEnv = [
        "passthru"
        "meta"
        "env"
        "pos"
        "finalPackage"
        "__structuredAttrs"
      ];
      toEnv =
        n: v:
        if lib.isFunction v then
          fail "mkDerivation ${name}: ${n} is a function"
        else if builtins.isAttrs v && !isDrv v && !(v ? outPath) then
          fail "mkDerivation ${name}: ${n} is an attribute set (only env takes those)"
        else if builtins.isList v then
          lib.flatten v
        else
          v;
      drv = derivation (
        lib.mapAttrs toEnv (builtins.removeAttrs args nonEnv)
        // lib.mapAttrs toEnv (args.env or { })
        // {
          inherit name system builder;
          args = refuse;
        }
      );
    in
    drv
    // (args.passthru or { })
    // {
      inherit (drv) drvPath outPath;
      meta = args.meta or { };
      overrideAttrs = f: mkDerivationFrom (lib.extends (lib.toExtension f) argsFn);
      finalPackage = drv;
    };

  # A package of nixpkgs the kit uses only by name: a placeholder derivation.
  leaf = pname: version: mkDerivation { inherit pname version; };

  # mkShell's own arguments; any other name is an environment variable. nixpkgs accepts
  # a misspelt one silently, so only the ones the kit sets are allowed here.
  shellArgs = [
    "name"
    "packages"
    "buildInputs"
    "nativeBuildInputs"
    "inputsFrom"
    "shellHook"
    "env"
    "LAB_KIT_NIX_SHELL"
    "KUBEBUILDER_ASSETS"
  ];
  checkArgs =
    what: allowed: args:
    let
      unknown = builtins.filter (n: !(lib.elem n allowed)) (builtins.attrNames args);
    in
    if unknown == [ ] then args else fail "${what}: unknown argument(s) ${toString unknown}";

  # The keys of an OCI image config (dockerTools writes `config` as it is).
  imageConfigKeys = [
    "User"
    "ExposedPorts"
    "Env"
    "Entrypoint"
    "Cmd"
    "Volumes"
    "WorkingDir"
    "Labels"
    "StopSignal"
    "ArgsEscaped"
    "Healthcheck"
    "OnBuild"
    "Shell"
  ];
  # dockerTools' `created`: "now", or a date-time like 1970-01-01T00:00:01Z.
  validCreated =
    c:
    c == "now"
    || builtins.match "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?Z" c != null;
  buildLayeredImage =
    args:
    let
      a = checkArgs "dockerTools.buildLayeredImage" [
        "name"
        "tag"
        "contents"
        "config"
        "created"
        "compressor"
        "maxLayers"
        "extraCommands"
        "fakeRootCommands"
        "enableFakechroot"
        "fromImage"
        "architecture"
        "includeStorePaths"
        "passthru"
        "uid"
        "gid"
        "uname"
        "gname"
        "meta"
      ] args;
      compressor = a.compressor or "gz";
      ext = {
        none = "";
        gz = ".gz";
        zstd = ".zst";
      };
      unknownConfig = builtins.filter (k: !(lib.elem k imageConfigKeys)) (
        builtins.attrNames (a.config or { })
      );
    in
    if !isLinux then
      fail "dockerTools.buildLayeredImage: images are built on Linux only here"
    else if unknownConfig != [ ] then
      fail "dockerTools.buildLayeredImage: unknown image config key(s) ${toString unknownConfig}"
    else if a ? created && !(builtins.isString a.created && validCreated a.created) then
      fail "dockerTools.buildLayeredImage: created must be \"now\" or a date-time like 1970-01-01T00:00:01Z, got ${builtins.toJSON a.created}"
    else if !(ext ? ${compressor}) then
      fail "dockerTools.buildLayeredImage: compressor must be none, gz or zstd"
    else if !(a ? name) then
      fail "dockerTools.buildLayeredImage: name is required"
    else
      mkDerivation {
        name = "${a.name}.tar${ext.${compressor}}";
        contents = a.contents or [ ];
        configJSON = builtins.toJSON (a.config or { });
        created = a.created or "1970-01-01T00:00:01Z";
        passthru = {
          imageName = a.name;
          imageTag = a.tag or "stand-in-hash";
          inherit compressor;
          config = a.config or { };
        };
      };

  base =
    final:
    let
      callPackage = lib.callPackageWith final;
      runCommand =
        name: env: buildCommand:
        mkDerivation (env // { inherit name buildCommand; });
      writeTextFile =
        {
          name,
          text,
          executable ? false,
          destination ? "",
          ...
        }:
        runCommand name {
          inherit text executable destination;
          passAsFile = [ "text" ];
        } "cp $textPath $out";
      stdenv = {
        inherit mkDerivation system;
        hostPlatform = platform;
        buildPlatform = platform;
        targetPlatform = platform;
        inherit (platform) isLinux isDarwin;
        cc = leaf "cc-wrapper" "0" // {
          # What rust-overlay's rustc takes from the bintools wrapper.
          bintools = leaf "bintools-wrapper" "0" // {
            expandResponseParams = leaf "expand-response-params" "0";
            coreutils_bin = leaf "coreutils" "0";
            shell = builder;
            suffixSalt = lib.replaceStrings [ "-" "." ] [ "_" "_" ] platform.config;
            wrapperName = "BINTOOLS_WRAPPER";
          };
          isClang = isDarwin;
          isGNU = isLinux;
          targetPrefix = "";
        };
        shell = builder;
      };
    in
    {
      inherit lib system config callPackage stdenv;
      pkgs = final;
      # rust-overlay copies a few of nixpkgs' wrapper scripts from its tree.
      path = ./.;
      newScope = extra: lib.callPackageWith (final // extra);
      stdenvNoCC = stdenv // {
        cc = null;
      };

      # No cross compilation here: every package set of the splice is this one.
      pkgsBuildBuild = final;
      pkgsBuildHost = final;
      pkgsBuildTarget = final;
      pkgsHostHost = final;
      pkgsHostTarget = final;
      pkgsTargetTarget = final;
      buildPackages = final;
      targetPackages = final;
      splicePackages = splices: splices.pkgsHostTarget;
      makeScopeWithSplicing' = lib.makeScopeWithSplicing' {
        inherit (final) splicePackages newScope;
      };

      fetchurl =
        {
          url ? builtins.head urls,
          urls ? [ ],
          name ? baseNameOf url,
          hash ? null,
          sha256 ? null,
          ...
        }:
        if hash == null && sha256 == null then
          fail "fetchurl ${url}: no hash"
        else
          derivation {
            inherit name system builder url;
            args = refuse;
            outputHashMode = "flat";
            outputHashAlgo = if hash != null then null else "sha256";
            outputHash = if hash != null then hash else sha256;
          };

      inherit runCommand writeTextFile;
      runCommandLocal = runCommand;
      runCommandCC = runCommand;
      writeText = name: text: writeTextFile { inherit name text; };
      writeScript =
        name: text:
        writeTextFile {
          inherit name text;
          executable = true;
        };
      writeShellScript = name: text: final.writeScript name text;
      symlinkJoin =
        args@{ name, paths, ... }:
        runCommand name (builtins.removeAttrs args [ "name" ]) "mkdir -p $out";
      linkFarm =
        name: entries:
        let
          bad = builtins.filter (
            e: !(builtins.isAttrs e && e ? name && e ? path && builtins.isString e.name)
          ) entries;
        in
        if !builtins.isString name then
          fail "linkFarm: name must be a string"
        else if !builtins.isList entries || bad != [ ] then
          fail "linkFarm: entries must be a list of { name, path }"
        else
          runCommand name {
            linkNames = map (e: e.name) entries;
            linkPaths = map (e: e.path) entries;
            passthru = { inherit entries; };
          } "mkdir -p $out";
      makeSetupHook =
        {
          name,
          substitutions ? { },
          propagatedBuildInputs ? [ ],
          ...
        }:
        script:
        runCommand name (
          {
            inherit script propagatedBuildInputs;
          }
          // substitutions
        ) "cp $script $out";
      rustPlatform.buildRustPackage = args: mkDerivation (builtins.removeAttrs args [ "cargoLock" ]);

      mkShell =
        args:
        let
          a = checkArgs "mkShell" shellArgs args;
          notDrvs = builtins.filter (p: !isDrv p) (a.packages or [ ]);
        in
        if notDrvs != [ ] then
          fail "mkShell: packages must be derivations"
        else if !builtins.isString (a.shellHook or "") then
          fail "mkShell: shellHook must be a string"
        else
          mkDerivation (
            builtins.removeAttrs a [ "packages" ]
            // {
              name = a.name or "nix-shell";
              nativeBuildInputs = (a.nativeBuildInputs or [ ]) ++ (a.packages or [ ]);
            }
          );
      dockerTools = { inherit buildLayeredImage; };

      # The packages the kit names, and the tools rust-overlay and crane put in builds.
      kind = leaf "kind" "0.33.0";
      kubectl = leaf "kubectl" "1.36.3";
      # nixpkgs marks kubernetes (kube-apiserver) Linux-only: using it elsewhere fails.
      kubernetes =
        if isLinux then
          leaf "kubernetes" "1.36.3"
        else
          fail "kubernetes-1.36.3 is not available on ${system} (meta.platforms)";
      etcd_3_6 = leaf "etcd" "3.6.13";
      docker-client = leaf "docker" "28.0.0";
      curl = leaf "curl" "8.17.0";
      cargo-nextest = leaf "cargo-nextest" "0.9.100";
      go = leaf "go" "1.26.0";
      gcc = leaf "gcc" "14.3.0";
      nixfmt-tree = leaf "nixfmt-tree" "0";
      gccForLibs = mkDerivation {
        pname = "gcc";
        version = "0";
        outputs = [
          "out"
          "lib"
        ];
      };
    }
    // lib.genAttrs [
      "autoPatchelfHook"
      "bash"
      "binaryen"
      "cargo-llvm-cov"
      "bintools"
      "curl"
      "git"
      "gnutar"
      "jq"
      "libiconv"
      "lndir"
      "makeWrapper"
      "remarshal"
      "rsync"
      "rustc"
      "cargo"
      "writableTmpDirAsHomeHook"
      "zlib"
      "zstd"
    ] (name: leaf name "0");

  pkgs = lib.fix (lib.foldl' (f: overlay: lib.extends overlay f) base overlays);
in
if system == "x86_64-darwin" then
  # As the pinned nixpkgs-unstable does (NixOS/nixpkgs#493096).
  throw "Nixpkgs 26.11 has dropped support for x86_64-darwin."
else if !(isLinux || isDarwin) then
  fail "unexpected system"
else if !builtins.isList overlays then
  fail "overlays must be a list"
else
  pkgs
