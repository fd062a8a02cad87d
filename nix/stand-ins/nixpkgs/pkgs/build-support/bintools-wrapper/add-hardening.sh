# stand-in: nixpkgs' bintools-wrapper/add-hardening.sh is not here; nothing that uses it is built
