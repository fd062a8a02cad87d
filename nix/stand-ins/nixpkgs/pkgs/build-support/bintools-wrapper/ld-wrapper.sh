# stand-in: nixpkgs' bintools-wrapper/ld-wrapper.sh is not here; nothing that uses it is built
