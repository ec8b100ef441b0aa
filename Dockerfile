# kcm's image: a static binary on a distroless base, running as a non-root user.
#   docker build -t kcm:0.1.0 .
# For arm64: --build-arg TARGET=aarch64-unknown-linux-musl (on an arm64 builder).
FROM rust:1.95-bookworm AS build
ARG TARGET=x86_64-unknown-linux-musl
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add "$TARGET"
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target "$TARGET" --bin kcm \
 && cp "target/$TARGET/release/kcm" /kcm

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /kcm /kcm
USER 65532:65532
EXPOSE 10257
ENTRYPOINT ["/kcm"]
