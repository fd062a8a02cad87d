# The controller image, built anywhere Docker runs (macOS with Docker Desktop
# included): a static binary in an empty image, run as a non-root user.
# `cargo xtask lab up --image-builder dockerfile` uses it. On Linux the kit
# prefers building the binary on the host (`--image-builder host`: no base
# image to pull), and in the Nix shell `nix build .#image`.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# glibc linked statically (static-pie): no musl toolchain needed in the image.
RUN triple="$(rustc -vV | sed -n 's/^host: //p')" \
 && RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --locked --release -p controller --bin my-controller --target "$triple" \
 && cp "target/$triple/release/my-controller" /my-controller

FROM scratch
COPY --from=build /my-controller /my-controller
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/my-controller"]
