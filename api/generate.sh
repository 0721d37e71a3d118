#!/usr/bin/env bash
# Regenerates the Go code of Aegis's protos. Needs protoc (Debian package
# protobuf-compiler); installs the Go plugins at the versions go.mod pins.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v protoc >/dev/null || { echo "generate: protoc missing (apt-get install protobuf-compiler)" >&2; exit 1; }

tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT

GOBIN="$tools" go install google.golang.org/protobuf/cmd/protoc-gen-go
GOBIN="$tools" go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
go run ./api/internal/protodeps "$tools/deps.pb"

for proto in api/*/*.proto; do
  PATH="$tools:$PATH" protoc \
    --descriptor_set_in="$tools/deps.pb" \
    -I api -I /usr/include \
    --go_out=api --go_opt=paths=source_relative \
    --go-grpc_out=api --go-grpc_opt=paths=source_relative \
    "${proto#api/}"
done
