# stand-in: nixpkgs' bintools-wrapper/add-flags.sh is not here; nothing that uses it is built
