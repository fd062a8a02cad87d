# A fake derivation: an attrset that looks like one (type, name, outPath) and carries what
# was asked of it, so .ci/nix-check can inspect it. Nothing is built or written.
name: attrs:
{
  type = "derivation";
  inherit name;
  outPath = "/nix/store/00000000000000000000000000000000-${name}";
  drvPath = "/nix/store/00000000000000000000000000000000-${name}.drv";
}
// attrs
