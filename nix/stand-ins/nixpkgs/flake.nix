# The stand-in package set as a flake input (`--override-input nixpkgs path:…`): the
# real nixpkgs `lib`, and `import nixpkgs { … }` through default.nix.
{
  outputs =
    { self }:
    {
      lib = import ./lib;
      legacyPackages = self.lib.genAttrs [
        "x86_64-linux"
        "aarch64-linux"
        "aarch64-darwin"
      ] (system: import ./. { inherit system; });
    };
}
