#!/usr/bin/env bash
# The demo: two cclod daemons on loopback (each its own config, runtime dir and ports)
# and two client processes per daemon (4 ranks) running every collective (float32 sum,
# default algorithm) at 1 KiB, 64 KiB, 1 MiB and 16 MiB per rank, every result verified.
# Exits 0 only if all were right.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
bazel build //daemon:cclod //client:cclo-run //client:ccloctl
BIN=$(bazel info bazel-bin 2>/dev/null)

work=$(mktemp -d /tmp/cclo-demo.XXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

start_daemon() {  # name
  local name=$1
  mkdir -p "$work/$name"
  cat > "$work/$name/cclod.yaml" <<YAML
runtime_dir: $work/$name/run
host: 127.0.0.1
peer_port: 0
data_port: 0
metrics_port: 0
YAML
  "$BIN/daemon/cclod" --config "$work/$name/cclod.yaml" > "$work/$name/cclod.log" 2>&1 &
  pids+=($!)
  # Wait (at most 30 s) for the daemon's ready line.
  if ! timeout 30 grep -q -m1 "ready: peer" <(tail -F "$work/$name/cclod.log" 2>/dev/null); then
    echo "demo: cclod $name did not start:" >&2
    cat "$work/$name/cclod.log" >&2
    exit 1
  fi
  echo "demo: cclod $name is up ($(grep -o -m1 'ready: peer [^,]*' "$work/$name/cclod.log" | cut -d' ' -f2-))"
}

start_daemon node-a
start_daemon node-b

token=$("$BIN/client/cclo-run" token --runtime-dir "$work/node-a/run")
sizes=1K,64K,1M,16M
ranks=()
for rank in 0 1 2 3; do
  node=node-a
  if [ $((rank % 2)) -eq 1 ]; then node=node-b; fi
  table=()
  if [ "$rank" -eq 0 ]; then table=(--table); fi
  CCLO_TOKEN="$token" "$BIN/client/cclo-run" run --runtime-dir "$work/$node/run" --rank "$rank" \
    --size 4 --ops all --sizes "$sizes" "${table[@]}" &
  ranks+=($!)
done
status=0
for pid in "${ranks[@]}"; do wait "$pid" || status=1; done

echo
"$BIN/client/ccloctl" --runtime-dir "$work/node-a/run" status
if [ "$status" -eq 0 ]; then
  echo "demo: every result verified"
else
  echo "demo: FAILED (see the output above)" >&2
fi
exit "$status"
