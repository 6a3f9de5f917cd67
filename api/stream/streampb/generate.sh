#!/bin/sh
# Regenerates stream.pb.go and stream_grpc.pb.go from stream.proto (go
# generate runs it). The generators are pinned: protoc 3.21 (Debian 12's
# protobuf-compiler package), protoc-gen-go and protoc-gen-go-grpc at the
# versions go.mod's tool directives name (go tool builds them).
# Usage: generate.sh [OUTDIR]   (default: this directory)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
if ! command -v protoc >/dev/null 2>&1; then
  echo "generate.sh: protoc is not installed: apt-get install protobuf-compiler" >&2
  exit 1
fi
case "$(protoc --version)" in
  "libprotoc 3.21."*) ;;
  *) echo "generate.sh: want protoc 3.21 (Debian 12's protobuf-compiler), have $(protoc --version)" >&2; exit 1 ;;
esac
cd "$here"
gen_go=$(go tool -n protoc-gen-go)
gen_grpc=$(go tool -n protoc-gen-go-grpc)
protoc --proto_path="$here" \
  --plugin=protoc-gen-go="$gen_go" --go_out="$out" --go_opt=paths=source_relative \
  --plugin=protoc-gen-go-grpc="$gen_grpc" --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  stream.proto
