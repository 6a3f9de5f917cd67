#!/bin/sh
# Regenerates sluice/_proto/stream_pb2.py, the protobuf messages of the
# stream API, from the repository's api/stream/streampb/stream.proto.
# The generator is pinned: protoc 3.21 (Debian 12's protobuf-compiler), whose
# code the python3-protobuf 3.21 runtime accepts (a newer protoc's refuses
# it). The .proto is compiled as sluice/_proto/stream.proto, so that the
# descriptor's file name is this package's own in a process that loads
# other stream.proto files, and the classes' module is the one they live in.
# The gRPC stubs are not generated: sluice/stream.py calls the two methods
# through grpc's generic API (Channel.stream_stream).
# Usage: generate.sh [OUTDIR]   (default: this directory; the file goes to
# OUTDIR/sluice/_proto/stream_pb2.py)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
proto=$here/../../api/stream/streampb/stream.proto
if ! command -v protoc >/dev/null 2>&1; then
  echo "generate.sh: protoc is not installed: apt-get install protobuf-compiler" >&2
  exit 1
fi
case "$(protoc --version)" in
  "libprotoc 3.21."*) ;;
  *) echo "generate.sh: want protoc 3.21 (Debian 12's protobuf-compiler), have $(protoc --version)" >&2; exit 1 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/sluice/_proto" "$out/sluice/_proto"
cp "$proto" "$tmp/sluice/_proto/stream.proto"
protoc --proto_path="$tmp" --python_out="$out" sluice/_proto/stream.proto
