#!/usr/bin/env bash
# depth.sh: what queue depth costs the embedded backend, at full scale.
#
# Runs broker/embedded's TestDepth with SLUICE_DEPTH_MESSAGES messages queued
# (default 10,000,000; CI runs 100,000): the Go heap per queued message (the
# in-memory index), receive latency deep against a shallow queue, and the
# time from a restart to the first receive. docs/performance.md keeps the
# figures.
#
# Needs about 2 GB of memory and 3 GB of disk per 10 million messages, in
# TMPDIR (set it to put the data directory elsewhere). Takes minutes.
#
#   scripts/depth.sh              # 10 million
#   scripts/depth.sh 1000000      # another depth
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-10000000}"
echo "depth.sh: queueing $n messages (TMPDIR=${TMPDIR:-/tmp})"
SLUICE_DEPTH_MESSAGES="$n" nice go test ./broker/embedded -run '^TestDepth$' -count 1 -v -timeout 120m \
  | grep -E 'depth_test|^(--- |ok|FAIL|PASS)'
