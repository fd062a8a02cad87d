# stand-in: nixpkgs' wrapper-common/utils.bash is not here; nothing that uses it is built
