#!/usr/bin/env bash
# Peer benchmark: ../shared/tools/qbench against Sluice (JSON and query
# protocol), against the harness's null SQS server (the SDK client's ceiling on
# this machine) and against the RabbitMQ running here, all in one run so the
# figures can be quoted as ratios. Results: $OUT (JSON lines) and a markdown
# table on stdout; docs/benchmarks.md records a run.
#
# usage: scripts/bench-peers.sh            (DUR=8s N=50000 REPS=1 by default)
# env:   DUR, N, REPS, QBENCH_SRC (default ../shared/tools/qbench), OUT
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QBENCH_SRC=${QBENCH_SRC:-$ROOT/../shared/tools/qbench}
DUR=${DUR:-8s}; N=${N:-50000}; REPS=${REPS:-1}
WORK=$(mktemp -d /tmp/sluice-bench.XXXXXX)
OUT=${OUT:-$WORK/results.jsonl}
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT

echo "building qbench (a copy of $QBENCH_SRC) and sluice in $WORK" >&2
cp -r "$QBENCH_SRC/." "$WORK/qbench" && chmod -R u+w "$WORK/qbench"
(cd "$WORK/qbench" && go build -o bin/qbench . && go build -o bin/nullsqs ./cmd/nullsqs)
go build -o "$WORK/sluice" ./cmd/sluice
Q=$WORK/qbench/bin/qbench

wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 did not open" >&2; return 1; }

# matrix LABEL PID driver-flags...: the runs quoted in docs/benchmarks.md
matrix() {
  local label=$1 pid=$2; shift 2
  local c="-pid $pid -label $label -out $OUT"
  for r in $(seq "$REPS"); do
    $Q produce "$@" $c -p 1 -batch 1 -d "$DUR" -warmup 1s
    $Q produce "$@" $c -p 32 -batch 1 -d "$DUR" -warmup 1s
    $Q produce "$@" $c -p 8 -batch 10 -d "$DUR" -warmup 1s
    $Q drain "$@" $c -n "$N" -c 8 -rbatch 10 -timeout 60s
  done
}

# Sluice, on its embedded store, one fresh data directory per protocol.
for proto in sqs sqsquery; do
  "$WORK/sluice" serve --addr 127.0.0.1:9330 --data "$WORK/data-$proto" 2> "$WORK/sluice-$proto.log" &
  SP=$!; wait_port 9330
  matrix "sluice-$proto" "$SP" -driver "$proto" -endpoint http://127.0.0.1:9330
  kill -TERM "$SP"; wait "$SP" || true
  grep -h "syncs" "$WORK/sluice-$proto.log" | tail -1 >&2 || true
done

# Sends per sync under 32 concurrent producers: a fresh broker, one produce run.
"$WORK/sluice" serve --addr 127.0.0.1:9330 --data "$WORK/data-sync" 2> "$WORK/sluice-sync.log" &
SP=$!; wait_port 9330
$Q produce -driver sqs -endpoint http://127.0.0.1:9330 -pid "$SP" -label sluice-sync-p32 -out "$OUT" -p 32 -batch 1 -d "$DUR" -warmup 0s | tee "$WORK/sync-run.txt"
kill -TERM "$SP"; wait "$SP" || true
SENT=$(grep -o 'send: [0-9]* msgs' "$WORK/sync-run.txt" | grep -o '[0-9]*' | head -1)
SYNCS=$(grep -ho 'syncs=[0-9]*' "$WORK/sluice-sync.log" | tail -1 | cut -d= -f2)
# The broker's syncs also cover the queue's create and delete (a handful).
echo "group commit, 32 producers, single sends: ${SENT:-?} sends acknowledged, ${SYNCS:-?} store syncs" \
  "=> $(awk -v a="${SENT:-0}" -v b="${SYNCS:-0}" 'BEGIN{ if (b > 0) printf "%.1f", a/b; else print "?" }') sends per sync"

# The ceiling: the null SQS server.
"$WORK/qbench/bin/nullsqs" -addr 127.0.0.1:9331 2> "$WORK/nullsqs.log" &
NP=$!; wait_port 9331
matrix nullsqs-json "$NP" -driver sqs -endpoint http://127.0.0.1:9331
matrix nullsqs-query "$NP" -driver sqsquery -endpoint http://127.0.0.1:9331
kill "$NP"; wait "$NP" 2>/dev/null || true

# RabbitMQ, as the machine runs it (classic durable queue, publisher confirms).
RMQ=$(pgrep -f 'beam.*rabbit' | head -1 || true)
if [ -n "$RMQ" ] && wait_port 5672; then
  matrix rabbitmq-classic "$RMQ" -driver amqp -amqp-queue-type classic
else
  echo "RabbitMQ is not running on 127.0.0.1:5672: skipped (start it with 'rabbitmq-server -detached')" >&2
fi

$Q report "$OUT"
echo "raw results: $OUT" >&2
