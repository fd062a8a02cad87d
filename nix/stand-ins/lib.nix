# Stand-in for the part of nixpkgs' `lib` that flake.nix uses, written with builtins
# only (the real nixpkgs cannot be fetched where .ci/nix-check runs). Same names and
# argument order as nixpkgs; arguments are type-checked so that a misuse fails here.
# A function flake.nix starts to use must be added here too: that is the point.
let
  fail = msg: throw "stand-in lib: ${msg}";
  expect =
    what: pred: v:
    if pred v then v else fail "${what}: got a ${builtins.typeOf v}";
  bool = what: expect what builtins.isBool;
  list = what: expect what builtins.isList;
  attrs = what: expect what builtins.isAttrs;
  str = what: expect what builtins.isString;

  hasPrefix =
    prefix: s:
    builtins.substring 0 (builtins.stringLength prefix) s == prefix;
in
rec {
  inherit (builtins) elem mapAttrs concatStringsSep;

  genAttrs =
    names: f:
    builtins.listToAttrs (
      map (n: {
        name = str "genAttrs: a name" n;
        value = f n;
      }) (list "genAttrs: names" names)
    );

  optionals = cond: xs: if bool "optionals: condition" cond then list "optionals: value" xs else [ ];
  optionalAttrs = cond: as: if bool "optionalAttrs: condition" cond then attrs "optionalAttrs: value" as else { };
  optionalString = cond: s: if bool "optionalString: condition" cond then str "optionalString: value" s else "";

  findFirst =
    pred: default: xs:
    let
      found = builtins.filter pred (list "findFirst: list" xs);
    in
    if found == [ ] then default else builtins.head found;

  inherit hasPrefix;
  removePrefix =
    prefix: s:
    let
      n = builtins.stringLength (str "removePrefix: prefix" prefix);
    in
    if hasPrefix prefix (str "removePrefix: string" s) then
      builtins.substring n (builtins.stringLength s - n) s
    else
      s;

  # Real cleanSource removes .git, result symlinks, editor files. Here: the path itself.
  cleanSource =
    src:
    if builtins.isPath src then src else fail "cleanSource: expects a path, got a ${builtins.typeOf src}";

  # Returns a source-like attrset. The filter is run on a few paths of this repository,
  # so a filter that drops what the build needs (or keeps target/) fails here.
  cleanSourceWith =
    args@{
      src,
      filter ? _: _: true,
      name ? "source",
    }:
    let
      root = toString src;
      keep = relative: type: filter "${root}/${relative}" type;
      mustKeep = [
        [ "Cargo.toml" "regular" ]
        [ "Cargo.lock" "regular" ]
        [ "rust-toolchain.toml" "regular" ]
        [ "bench" "directory" ]
        [ "controller" "directory" ]
        [ "e2e" "directory" ]
        [ "labkit" "directory" ]
        [ "xtask" "directory" ]
        [ "kind" "directory" ]
        [ "manifests" "directory" ]
        [ "README.md" "regular" ]
        [ ".ci" "directory" ]
      ];
      mustDrop = [ [ "target" "directory" ] ];
      wrong =
        builtins.filter (e: !(keep (builtins.elemAt e 0) (builtins.elemAt e 1))) mustKeep
        ++ builtins.filter (e: keep (builtins.elemAt e 0) (builtins.elemAt e 1)) mustDrop;
    in
    assert builtins.isFunction filter || fail "cleanSourceWith: filter is not a function";
    assert builtins.isString name || fail "cleanSourceWith: name is not a string";
    if wrong != [ ] then
      fail "cleanSourceWith: the source filter gets these wrong: ${
        toString (map (e: builtins.elemAt e 0) wrong)
      }"
    else
      {
        _standInSource = true;
        inherit name filter;
        outPath = root;
      };
}
