# Stand-in for the rust-overlay flake: overlays.default adds `rust-bin` with
# fromRustupToolchainFile, which reads the real rust-toolchain.toml, and `.override`
# (as rust-overlay's makeOverridable profiles do: new arguments are merged in).
let
  lib = import ./lib.nix;
  fake = import ./fake.nix;
  fail = msg: throw "stand-in rust-overlay: ${msg}";

  overrideArgs = [
    "extensions"
    "targets"
    "targetExtensions"
  ];

  mkToolchain =
    state:
    fake "rust-${state.profile}-${state.channel}" (
      state
      // {
        version = state.channel;
        override =
          more:
          let
            unknown = builtins.filter (n: !(lib.elem n overrideArgs)) (builtins.attrNames more);
            badTargets = builtins.filter (t: !builtins.isString t) (more.targets or [ ]);
          in
          if unknown != [ ] then
            fail "override: unknown argument(s) ${toString unknown}"
          else if !builtins.isList (more.targets or [ ]) || badTargets != [ ] then
            fail "override: targets must be a list of target triples"
          else
            mkToolchain (state // more);
      }
    );

  overlay = final: prev: {
    rust-bin = {
      fromRustupToolchainFile =
        path:
        let
          toolchain = (builtins.fromTOML (builtins.readFile path)).toolchain;
        in
        if !(toolchain ? channel) then
          fail "${toString path} has no toolchain.channel"
        else if builtins.match "[0-9]+\\.[0-9]+\\.[0-9]+" toolchain.channel == null then
          fail "${toString path}: channel ${toolchain.channel} is not a pinned x.y.z version"
        else if toolchain ? targets then
          fail "${toString path} lists targets: rustup on the workshop machines cannot download them; the flake adds them"
        else
          mkToolchain {
            inherit (toolchain) channel;
            profile = toolchain.profile or "default";
            extensions = toolchain.components or [ ];
            targets = [ ];
            targetExtensions = [ ];
          };
    };
  };
in
{
  overlays.default = overlay;
  overlays.rust-overlay = overlay;
}
