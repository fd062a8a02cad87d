# stand-in: nixpkgs' bintools-wrapper/add-darwin-ldflags-before.sh is not here; nothing that uses it is built
