#!/usr/bin/env bash
# Runs Sluice and its peers (RabbitMQ, NATS JetStream with lazy and with
# always fsync, River) under the same loads and writes docs/benchmarks.md.
#
#   bench/run.sh           full: 20 s measured per load and system (about 20 minutes)
#   bench/run.sh --quick   3 s per load and system: a smoke run (about 5 minutes)
#
# Sluice runs over SQS JSON (the lean client) and over its stream API
# (--protocol stream: gRPC Publish and Consume streams on the same port).
#
# Needs Go, RabbitMQ at 127.0.0.1:5672 (guest/guest) and PostgreSQL at
# 127.0.0.1:5432 (user postgres, trust auth); a peer that is not reachable
# gets a row that says so. Builds sluice, peerbench, benchreport and
# nats-server into bench/bin/ (gitignored), starts a fresh Sluice (temporary
# data directory) and fresh nats-servers for each load, keeps the raw JSON
# summaries in a temporary directory it prints, and rewrites docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

dur=20s warm=3s drain=50000 mode=full
if [ "${1:-}" = "--quick" ]; then dur=3s warm=1s drain=10000 mode=quick; fi

NATS_VERSION=v2.15.3
SLUICE_PORT=${SLUICE_BENCH_PORT:-39324}
NULL_PORT=$((SLUICE_PORT + 1))
NATS_PORT=$((SLUICE_PORT + 2))
PG=${SLUICE_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
AMQP=${SLUICE_BENCH_AMQP:-amqp://guest:guest@127.0.0.1:5672/}

bin=$root/bench/bin
out=$(mktemp -d /tmp/sluice-bench.XXXXXX)
mkdir -p "$bin"
echo "results in $out"

echo "building sluice, peerbench, benchreport into bench/bin/"
go build -o "$bin/sluice" ./cmd/sluice
(cd bench && go build -o "$bin/peerbench" ./cmd/peerbench && go build -o "$bin/benchreport" ./cmd/benchreport)
if ! "$bin/nats-server" --version 2>/dev/null | grep -q "${NATS_VERSION#v}"; then
  echo "building nats-server $NATS_VERSION (Go module proxy)"
  (cd /tmp && GOFLAGS=-mod=mod GOBIN=$bin go install "github.com/nats-io/nats-server/v2@$NATS_VERSION")
fi

# listening HOST:PORT waits (bounded) until something accepts connections.
listening() {
  local host=${1%:*} port=${1#*:}
  for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  return 1
}
free_port() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in $SLUICE_PORT $NULL_PORT $NATS_PORT; do
  free_port "$p" || { echo "port $p is in use: set SLUICE_BENCH_PORT to a free range" >&2; exit 1; }
done

pids_to_stop=()
stop_all() {
  for p in "${pids_to_stop[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids_to_stop=()
}
trap stop_all EXIT

psql_do() { psql "$PG/postgres" -qtAc "$1"; }
pg_pid() { psql "$PG/postgres" -qtAc "select pg_postmaster_start_time()" >/dev/null && pgrep -o -x postgres || true; }

# start_sluice DATADIR_OR_STORE: a fresh broker on SLUICE_PORT; sets spid.
start_sluice() {
  local args=(serve --addr "127.0.0.1:$SLUICE_PORT" --log-level warn --dashboard=false)
  if [ "${1:-}" = "pg" ]; then
    psql_do "drop database if exists sluice_bench_pg with (force)"
    psql_do "create database sluice_bench_pg"
    args+=(--store "$PG/sluice_bench_pg")
  else
    args+=(--data "$(mktemp -d "$out/data.XXXXXX")")
  fi
  "$bin/sluice" "${args[@]}" >>"$out/sluice.log" 2>&1 &
  spid=$!
  pids_to_stop+=("$spid")
  listening "127.0.0.1:$SLUICE_PORT" || { echo "sluice did not start: see $out/sluice.log" >&2; exit 1; }
}

# start_nats lazy|always: a fresh nats-server with JetStream; sets npid.
start_nats() {
  local dir conf
  dir=$(mktemp -d "$out/nats.XXXXXX")
  conf=$dir/nats.conf
  {
    echo "listen: 127.0.0.1:$NATS_PORT"
    echo "jetstream { store_dir: \"$dir/store\""
    [ "$1" = "always" ] && echo "  sync_interval: always"
    echo "}"
  } >"$conf"
  "$bin/nats-server" -c "$conf" >>"$out/nats.log" 2>&1 &
  npid=$!
  pids_to_stop+=("$npid")
  listening "127.0.0.1:$NATS_PORT" || { echo "nats-server did not start: see $out/nats.log" >&2; exit 1; }
}

common=(--duration "$dur" --warmup "$warm" --quiet --json --body-size 256)
n=0
# record LOAD KEY LABEL NOTE CMD...: runs CMD, its JSON into a file, one index line.
record() {
  local load=$1 key=$2 label=$3 note=$4
  shift 4
  n=$((n + 1))
  local f
  f=$(printf '%03d-%s-%s.json' "$n" "$load" "$key")
  echo "  $load / $label"
  if [ -z "$note" ]; then
    nice -n 5 "$@" >"$out/$f" 2>"$out/$f.err" || true
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$load" "$key" "$label" "$f" "$note" >>"$out/index.tsv"
}

rabbit_pid=$(pgrep -o beam.smp || true)
rabbit_note=""
(exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null || rabbit_note="RabbitMQ not reachable at 127.0.0.1:5672"

# run_load LOAD SYSTEMS ARGS...: one load against each named system.
run_load() {
  local load=$1 systems=$2
  shift 2
  echo "load $load: $*"
  for sys in $systems; do
    case $sys in
    sluice)
      start_sluice
      record "$load" sluice "Sluice (embedded, SQS JSON)" "" "$bin/sluice" bench --url "http://127.0.0.1:$SLUICE_PORT" --pid "$spid" "${common[@]}" "$@"
      stop_all ;;
    sluice-stream | sluice-stream-2 | sluice-stream-3)
      start_sluice
      local nth=${sys#sluice-stream}
      record "$load" "$sys" "Sluice (embedded, stream API)${nth:+, run ${nth#-}}" "" "$bin/sluice" bench --url "http://127.0.0.1:$SLUICE_PORT" --protocol stream --pid "$spid" "${common[@]}" "$@"
      stop_all ;;
    sluice-pg-stream)
      start_sluice pg
      record "$load" sluice-pg-stream "Sluice (PostgreSQL backend, stream API); CPU = Sluice + PostgreSQL" "" "$bin/sluice" bench --url "http://127.0.0.1:$SLUICE_PORT" --protocol stream --pid "$spid,$(pg_pid)" "${common[@]}" "$@"
      stop_all ;;
    sluice-sdk | sluice-json)
      start_sluice
      local proto=${sys#sluice-}
      record "$load" "$sys" "Sluice (embedded) via $proto client" "" "$bin/sluice" bench --url "http://127.0.0.1:$SLUICE_PORT" --protocol "$proto" --pid "$spid" "${common[@]}" "$@"
      stop_all ;;
    null-sdk | null-json)
      "$bin/sluice" bench --null-server "127.0.0.1:$NULL_PORT" >>"$out/null.log" 2>&1 &
      local nullpid=$!
      pids_to_stop+=("$nullpid")
      listening "127.0.0.1:$NULL_PORT"
      local proto=${sys#null-}
      record "$load" "$sys" "null server via $proto client" "" "$bin/sluice" bench --url "http://127.0.0.1:$NULL_PORT" --protocol "$proto" --pid "$nullpid" "${common[@]}" "$@"
      stop_all ;;
    sluice-pg)
      start_sluice pg
      record "$load" sluice-pg "Sluice (PostgreSQL backend, SQS JSON); CPU = Sluice + PostgreSQL" "" "$bin/sluice" bench --url "http://127.0.0.1:$SLUICE_PORT" --pid "$spid,$(pg_pid)" "${common[@]}" "$@"
      stop_all ;;
    river)
      psql_do "drop database if exists sluice_bench_river with (force)"
      psql_do "create database sluice_bench_river"
      record "$load" river "River (in the generator's process); CPU = PostgreSQL" "" "$bin/peerbench" --system river --pg-url "$PG/sluice_bench_river" --pid "$(pg_pid)" "${common[@]}" "$@" ;;
    rabbitmq)
      record "$load" rabbitmq "RabbitMQ (classic durable queue, confirms, manual acks)" "$rabbit_note" "$bin/peerbench" --system rabbitmq --amqp-url "$AMQP" ${rabbit_pid:+--pid "$rabbit_pid"} "${common[@]}" "$@" ;;
    nats-lazy | nats-always)
      local sync=${sys#nats-}
      start_nats "$sync"
      record "$load" "$sys" "NATS JetStream (file, fsync $sync)" "" "$bin/peerbench" --system nats --nats-url "nats://127.0.0.1:$NATS_PORT" --nats-sync "$sync" --pid "$npid" "${common[@]}" "$@"
      stop_all ;;
    esac
  done
}

{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "run=$mode ($dur measured after $warm warmup per load and system; drain $drain messages)"
  echo "machine=$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB memory, $(uname -sr)"
  echo "load average before=$(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared with other work)"
  echo "sluice=$("$bin/sluice" version 2>&1 | head -1) at commit $(git rev-parse --short HEAD)"
  echo "go=$(go version | cut -d' ' -f3)"
  echo "nats-server=$("$bin/nats-server" --version 2>&1 | head -1 | sed 's/^nats-server: //'), built from the Go module proxy; default lazy fsync, and sync_interval: always"
  echo "RabbitMQ=the local server at 127.0.0.1:5672 (its version is in each row's label in the JSON results), measured by beam.smp's pid ${rabbit_pid:-(not found)}"
  echo "PostgreSQL=$(psql "$PG/postgres" -qtAc 'show server_version' 2>/dev/null || echo unreachable) at 127.0.0.1:5432, measured by the postmaster's pid (all backends)"
  echo "bodies=256 bytes; SQS JSON over the lean client unless said; every send waits for the broker's durable confirmation"
} >"$out/meta.txt"

steady=(--mode steady --producers 32 --consumers 32 --batch 1 --receive-max 10)
run_load steady "sluice sluice-stream rabbitmq nats-lazy nats-always" "${steady[@]}"
run_load rate "sluice sluice-stream sluice-stream-2 sluice-stream-3 rabbitmq nats-lazy nats-always" "${steady[@]}" --rate 5000
run_load steady-batch "sluice sluice-stream rabbitmq nats-lazy" --mode steady --producers 32 --consumers 32 --batch 10 --receive-max 10
run_load produce-batch "sluice rabbitmq nats-lazy nats-always" --mode produce --producers 8 --batch 10
run_load drain "sluice rabbitmq nats-lazy nats-always" --mode drain --messages "$drain" --producers 8 --consumers 8 --batch 10 --receive-max 10
run_load single "sluice rabbitmq nats-lazy nats-always" --mode produce --producers 1 --batch 1
run_load sdk "sluice-sdk sluice-json null-sdk null-json" "${steady[@]}"
run_load postgres "sluice-pg sluice-pg-stream river" "${steady[@]}"

rm -rf "$out"/data.* "$out"/nats.*
echo "load average after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/meta.txt"
"$bin/benchreport" --dir "$out" --out docs/benchmarks.md
echo "wrote docs/benchmarks.md (raw results in $out)"
