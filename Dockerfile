# kioku and the companion demo in one small image: static binaries on
# distroless, run as a non-root user, data in a volume.
#
#   docker build -t kioku --build-arg VERSION=v0.1.0 .
#   docker run -p 127.0.0.1:8080:8080 -v kioku-data:/data kioku
#   docker run -p 127.0.0.1:8090:8090 --entrypoint companion kioku --model-provider demo --addr 0.0.0.0:8090
#
# compose.yaml runs kioku on the Firestore emulator with the companion.
# CI runs this file's go build line outside Docker (.ci/run) and checks the
# rest against the binaries' flags (cmd/kioku/deploy_test.go).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The release this is built from, for kioku version (the image has no VCS
# data to stamp it).
ARG VERSION=
RUN mkdir -p /out/data
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -X main.releaseVersion=${VERSION}" -o /out/ ./cmd/kioku ./cmd/companion

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kioku /out/companion /usr/local/bin/
# The embedded store's directory, owned by the nonroot user (65532).
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME /data
ENV KIOKU_ADDR=0.0.0.0:8080 KIOKU_DATA_DIR=/data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/kioku"]
CMD ["serve"]
