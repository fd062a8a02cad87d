# Stand-in for `import nixpkgs { system; overlays; }`: only the packages and builders that
# flake.nix uses, as fake derivations. A misspelt or unknown attribute fails the check
# with "attribute ... missing". Versions here are placeholders, not what nixpkgs has.
{
  system,
  overlays ? [ ],
  config ? { },
}:
let
  lib = import ./lib.nix;
  fake = import ./fake.nix;
  fail = msg: throw "stand-in nixpkgs (${system}): ${msg}";

  isLinux = lib.elem system [
    "x86_64-linux"
    "aarch64-linux"
  ];
  isDarwin = lib.elem system [
    "x86_64-darwin"
    "aarch64-darwin"
  ];
  isDrv = v: builtins.isAttrs v && (v.type or null) == "derivation";

  # Environment variables a dev shell may set: the kit's own and a few common ones.
  # An UPPER_CASE name is an environment variable, so a misspelt one is not an error
  # in nixpkgs; here it is, and a real new one is added to this list.
  shellEnv = [
    "LAB_KIT_NIX_SHELL"
    "KUBEBUILDER_ASSETS"
    "RUST_LOG"
    "RUST_SRC_PATH"
  ];

  # Only the names in `allowed` (for mkShell: and the environment variables above).
  checkArgs =
    what: allowed: args:
    let
      unknown = builtins.filter (n: !(lib.elem n allowed)) (builtins.attrNames args);
    in
    if unknown == [ ] then args else fail "${what}: unknown argument(s) ${toString unknown}";

  # The keys of an OCI/Docker image config (dockerTools passes `config` through).
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

  # nixpkgs marks kubernetes (kube-apiserver) Linux-only; using it elsewhere fails.
  linuxOnly =
    name: version:
    if isLinux then
      fake "${name}-${version}" { inherit version; }
    else
      fake "${name}-${version}" {
        inherit version;
        outPath = fail "${name} is Linux-only (meta.platforms)";
      };

  base = {
    inherit lib system;
    stdenv.hostPlatform = {
      inherit system isLinux isDarwin;
    };

    kind = fake "kind-stand-in" { version = "0.33.0"; };
    kubectl = fake "kubectl-stand-in" { version = "1.36.3"; };
    kubernetes = linuxOnly "kubernetes-stand-in" "1.36.3";
    etcd_3_6 = fake "etcd-stand-in" { version = "3.6.13"; };
    docker-client = fake "docker-client-stand-in" { version = "28.0.0"; };
    cargo-nextest = fake "cargo-nextest-stand-in" { version = "0.9.100"; };
    go = fake "go-stand-in" { version = "1.26.0"; };

    mkShell =
      args:
      let
        a = checkArgs "mkShell" ([
          "name"
          "packages"
          "buildInputs"
          "nativeBuildInputs"
          "inputsFrom"
          "shellHook"
          "env"
        ] ++ shellEnv) args;
        notDrvs = builtins.filter (p: !isDrv p) (a.packages or [ ]);
      in
      if notDrvs != [ ] then
        fail "mkShell: packages must be derivations"
      else if !builtins.isString (a.shellHook or "") then
        fail "mkShell: shellHook must be a string"
      else
        fake "nix-shell" a;

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
        fake name {
          entries = map (e: {
            name = e.name;
            path = toString e.path;
          }) entries;
        };

    dockerTools = {
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
          fake "${a.name}.tar${ext.${compressor}}" (
            a
            // {
              name = "${a.name}.tar${ext.${compressor}}";
              imageName = a.name;
              imageTag = a.tag or "stand-in-hash";
              inherit compressor;
            }
          );
    };
  };

  # Overlays the way nixpkgs applies them: final and prev.
  final = builtins.foldl' (prev: overlay: prev // overlay final prev) base overlays;
in
if system == "x86_64-darwin" then
  # As the pinned nixpkgs-unstable does (NixOS/nixpkgs#493096).
  throw "Nixpkgs 26.11 has dropped support for x86_64-darwin."
else if !(isLinux || isDarwin) then
  fail "unexpected system"
else if !builtins.isList overlays then
  fail "overlays must be a list"
else
  final
