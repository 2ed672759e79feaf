#!/usr/bin/env bash
# The load line of issue 7 on this machine: `estuary serve` (SQLite, --sync full) on a loopback
# port, fake agents registering NODES nodes of 8 GPUs (default 20,000 = 160,000 GPUs, in AGENTS
# processes), then estuary_load submitting single-GPU jobs at RATE per second for DURATION
# seconds (defaults 1000 and 60). Prints estuary_load's JSON (rate achieved, submit round trip,
# submit-to-running p50/p90/p99/max) and the service's own metrics. Run from the repository root
# after `make build` (or `cmake --build build`).
#   NODES=20000 AGENTS=2 RATE=1000 DURATION=60 JOB_S=30 SYNC=full bash bench/service_load.sh
# KILL_AT=S kills the service with SIGKILL S seconds into the load and starts it again on the same
# data (crash safety under load): estuary_load's accepted_missing must stay 0, and the service's
# /v1/debug/invariants must hold afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-20000}
AGENTS=${AGENTS:-2}
RATE=${RATE:-1000}
DURATION=${DURATION:-60}
JOB_S=${JOB_S:-30}
SYNC=${SYNC:-full}
PORT=${PORT:-18931}
BIN=build/estuary
LOAD=build/bench/estuary_load
work=$(mktemp -d /tmp/estuary-load-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; pkill -f "$work/data" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
{
  echo "admin-token-0123456789 admin ops"
  echo "tenant-token-012345678 tenant load"
  for a in $(seq 1 "$AGENTS"); do echo "agent-token-$(printf %010d "$a") agent agent-$a"; done
} > "$work/tokens"
serve() {
  "$BIN" serve --listen "127.0.0.1:$PORT" --data "$work/data" --tokens "$work/tokens" --sync "$SYNC" 2>> "$work/serve.log" &
  serve_pid=$!
}
serve
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/v1/openapi.json" >/dev/null && break; sleep 0.1; done
per=$(( NODES / AGENTS ))
for a in $(seq 1 "$AGENTS"); do
  "$BIN" agent --server "http://127.0.0.1:$PORT" --token "agent-token-$(printf %010d "$a")" --fake-nodes "$per" \
    --gpus-per-node 8 --prefix "rack$a" 2> "$work/agent$a.log" &
done
# Wait until every node is registered.
for _ in $(seq 1 600); do
  n=$(curl -s -H 'Authorization: Bearer admin-token-0123456789' "http://127.0.0.1:$PORT/metrics" |
      awk '/^estuary_nodes\{state="ready"\}/ {print $2}')
  [ "${n:-0}" -ge $(( per * AGENTS )) ] && break
  sleep 0.5
done
echo "nodes ready: ${n:-0}, GPUs: $(( ${n:-0} * 8 ))" >&2
if [ -n "${KILL_AT:-}" ]; then
  ( sleep "$KILL_AT"; kill -9 "$serve_pid"; echo "killed the service (SIGKILL) at ${KILL_AT}s" >&2
    sleep 0.3; "$BIN" serve --listen "127.0.0.1:$PORT" --data "$work/data" --tokens "$work/tokens" --sync "$SYNC" \
      2>> "$work/serve.log" & wait ) &
fi
"$LOAD" --server "http://127.0.0.1:$PORT" --token tenant-token-012345678 --admin-token admin-token-0123456789 \
  --rate "$RATE" --duration-s "$DURATION" --job-duration-s "$JOB_S" --threads 8
echo "invariants: $(curl -s -H 'Authorization: Bearer admin-token-0123456789' "http://127.0.0.1:$PORT/v1/debug/invariants")" >&2
curl -s -H 'Authorization: Bearer admin-token-0123456789' "http://127.0.0.1:$PORT/metrics" |
  grep -E '^estuary_(jobs|gpu_allocation_ratio|cycles_total|store_commit_rounds_total|decisions_total|submit_to_running_seconds_(sum|count)|cycle_seconds_(sum|count))' >&2
