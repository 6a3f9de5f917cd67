#!/usr/bin/env bash
# under-load.sh runs the README's test command twice at once, ROUNDS times
# (default 5), so that every test runs on a loaded machine: a test that
# depends on the machine's speed (an ordering, a deadline that load can
# miss) fails here before it fails CI. Each run's output is kept under
# $OUT (default a new temporary directory); the script prints each round's
# durations and the failing tests, and exits 1 if any run failed.
#
#   scripts/under-load.sh          # 5 rounds, 10 runs of go test ./...
#   ROUNDS=2 scripts/under-load.sh
#
# Set SLUICE_REQUIRE (e.g. postgres) as CI does to make missing parts fail
# instead of skip. Two runs share the machine's PostgreSQL: they use
# databases and schemas of their own (internal/pgtest), so they do not
# interfere, but together they need more than PostgreSQL's default 100
# connections: .ci/run raises max_connections to 300, and this script says
# so when it is lower.
set -uo pipefail
if command -v psql >/dev/null 2>&1; then
  maxconn=$(psql -h 127.0.0.1 -U postgres -tAc 'show max_connections' 2>/dev/null || true)
  if [ -n "$maxconn" ] && [ "$maxconn" -lt 300 ]; then
    echo "PostgreSQL allows $maxconn connections; two runs at once need about 300: run .ci/run once (it raises max_connections), or: psql -h 127.0.0.1 -U postgres -c 'alter system set max_connections = 300' and restart PostgreSQL" >&2
  fi
fi
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-5}
out=${OUT:-$(mktemp -d /tmp/sluice-under-load.XXXXXX)}
mkdir -p "$out"
export GOFLAGS=${GOFLAGS:--count=1 -timeout=25m}
failed=0
for r in $(seq 1 "$rounds"); do
  start=$SECONDS
  go test ./... > "$out/round$r-a.log" 2>&1 &
  a=$!
  go test ./... > "$out/round$r-b.log" 2>&1 &
  b=$!
  wait $a; sa=$?
  wait $b; sb=$?
  echo "round $r: $((SECONDS - start))s, exit codes $sa and $sb"
  for f in "$out/round$r-a.log" "$out/round$r-b.log"; do
    if grep -qE '^(--- FAIL|FAIL|panic:)' "$f"; then
      failed=1
      echo "  failures in $f:"
      grep -E '^\s*--- FAIL|^FAIL' "$f" | sed 's/^/    /'
    fi
  done
  [ "$sa" = 0 ] && [ "$sb" = 0 ] || failed=1
done
echo "logs in $out"
exit $failed
