#!/usr/bin/env bash
# Runs etcd's put benchmark (../shared/bench/etcd-peer.sh, or $ETCD_PEER) and agentplane's
# ctl bench against a fresh control plane on its defaults, one after the other on this
# machine, and prints both sides' figures:
#   StartTask at 1 client and at 64 clients over 8 connections (etcd: the same),
#   ReportEvents at 1 and 64 clients, the gated-call round trip (1000 calls), and the health
#   check at 64 clients (an RPC that does nothing: what the machine allows any call).
# Usage: tools/bench/side-by-side.sh [ROUNDS]   (default 1; each round runs everything once)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-1}
peer=${ETCD_PEER:-../shared/bench/etcd-peer.sh}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/controlplane" ./cmd/controlplane
go build -o "$bin/ctl" ./cmd/ctl
port=$((27000 + RANDOM % 2000))
ctl() { "$bin/ctl" --addr "127.0.0.1:$port" "$@"; }
# settle lets the disk finish the previous run's writeback (and the removal of its data
# directory) before the next one measures fsync latency: each side starts on a quiet disk.
settle() { sync; sleep 2; }
fresh() { # runs "$@" against a control plane on a fresh data directory
  local data pid
  settle
  data=$(mktemp -d)
  "$bin/controlplane" --data-dir "$data" --grpc-addr "127.0.0.1:$port" --http-addr off --log-level warn >/dev/null &
  pid=$!
  for _ in $(seq 1 100); do ctl health >/dev/null 2>&1 && break; sleep 0.1; done
  "$@" || true
  kill "$pid"; wait "$pid" || true
  rm -rf "$data"
}
both() {
  ctl bench start --clients 1 --total 3000 | tail -1
  ctl bench start --clients 64 --conns 8 --total 20000 | tail -1
}
events() {
  ctl bench events --clients 1 --total 3000 | tail -1
  ctl bench events --clients 64 --conns 8 --total 20000 | tail -1
}
for r in $(seq 1 "$rounds"); do
  echo "# round $r"
  settle
  if [[ -f $peer ]]; then bash "$peer" 3000 20000 || true; else echo "etcd: $peer not found"; fi
  fresh both
  fresh events
  fresh ctl bench gate --total 1000
  fresh ctl bench health --clients 64 --conns 8 --total 100000
done
