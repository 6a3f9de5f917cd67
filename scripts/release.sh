#!/usr/bin/env bash
# Builds Sluice's release binaries: static (CGO_ENABLED=0), reproducible
# (-trimpath, -buildvcs=false, no build id: the same source, Go version and
# flags give the same bytes wherever and whenever they are built), with the
# version and commit stamped in (`sluice --version` prints them), and a
# SHA256SUMS file beside them.
#
#   scripts/release.sh [VERSION]
#
# VERSION is a semantic version with a leading v (v1.2.3, v1.3.0-rc.1);
# without it, `git describe --tags --match 'v*'` of the checkout (a commit
# after the last tag gives v1.2.3-4-gabcdef012345; no tag at all gives
# v0.0.0-<commit>). The environment may set:
#
#   COMMIT     the commit stamped in (default: git rev-parse HEAD; needed
#              when there is no .git, as in the Dockerfile's build)
#   PLATFORMS  the GOOS/GOARCH pairs to build (default: linux/amd64
#              linux/arm64 darwin/amd64 darwin/arm64)
#   DIST       the output directory (default: dist; emptied first)
#
# Output: $DIST/sluice-VERSION-OS-ARCH for each platform and
# $DIST/SHA256SUMS (`cd dist && sha256sum -c SHA256SUMS` checks them).
# docs/deploy.md says how to verify a download. The Dockerfile builds its
# binary with this script, and cmd/sluice's TestSerialReleaseReproducible
# builds linux/amd64 twice from two directories and compares the bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-}
if [ -z "$version" ]; then
  version=$(git describe --tags --match 'v*' --abbrev=12 2>/dev/null ||
    echo "v0.0.0-$(git rev-parse --short=12 HEAD)")
fi
case "$version" in
  v[0-9]*) ;;
  *) echo "release.sh: version $version does not start with v and a digit (v1.2.3)" >&2; exit 2 ;;
esac
commit=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || true)}
if [ -z "$commit" ]; then
  echo "release.sh: no commit: run it in a git checkout, or set COMMIT" >&2
  exit 2
fi
if [ -z "${COMMIT:-}" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "release.sh: warning: the tree has uncommitted changes; the binaries say commit $commit all the same" >&2
fi
platforms=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
dist=${DIST:-dist}

rm -rf "$dist"
mkdir -p "$dist"
# The flags every release build uses, the Dockerfile's included:
#   CGO_ENABLED=0   a static binary that needs no libc (scratch and
#                   distroless images; Pebble is pure Go)
#   -trimpath       no path of the build machine in the binary
#   -buildvcs=false no VCS stamp: the version and commit come from -X
#   -buildid=       no build id (it would be reproducible too, but it is
#                   one more thing to explain when bytes differ)
#   -s -w           no symbol table or DWARF (stack traces still name
#                   functions and lines)
ldflags="-s -w -buildid= -X github.com/sluicemq/sluice/internal/buildinfo.buildVersion=$version -X github.com/sluicemq/sluice/internal/buildinfo.buildCommit=$commit"
for p in $platforms; do
  os=${p%/*}
  arch=${p#*/}
  out="$dist/sluice-$version-$os-$arch"
  echo "building $out"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOFLAGS= \
    go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out" ./cmd/sluice
done
(cd "$dist" && sha256sum sluice-* > SHA256SUMS)
cat "$dist/SHA256SUMS"
