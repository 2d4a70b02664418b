#!/usr/bin/env bash
# systemd accepts deploy/systemd/cclod.service. `systemd-analyze verify` also checks that
# ExecStart names an executable, and the unit names the installed path
# (/usr/local/bin/cclod), which a build machine lacks; so the test verifies a copy whose
# ExecStart names the cclod just built, every other line unchanged. Any warning fails.
# The unit's TasksMax leaves room for the threads of that cclod idle, the waiting calls the
# shipped config's tenants may hold (waiting_calls) and 64 more; its OOMScoreAdjust is
# below 0 (cclod's oom_score counts every tenant buffer it maps) and above -1000 (a cclod
# that runs away stays killable).
# Usage: systemd_unit_test.sh <cclod.service> <cclod binary> <cclod.yaml>
set -euo pipefail
unit="$1"
cclod="$(realpath "$2")"
config="$3"
copy="${TEST_TMPDIR:-/tmp}/cclod.service"
sed "s#^ExecStart=/usr/local/bin/cclod #ExecStart=${cclod} #" "$unit" >"$copy"
if [ "$(diff "$unit" "$copy" | grep -c '^>')" -ne 1 ]; then
  echo "FAIL: $unit has no single line starting ExecStart=/usr/local/bin/cclod"
  exit 1
fi
if ! output="$(systemd-analyze verify "$copy" 2>&1)" || [ -n "$output" ]; then
  echo "FAIL: systemd-analyze verify $copy:"
  echo "$output"
  exit 1
fi
echo "PASS: systemd-analyze verify accepts $unit (ExecStart=$cclod)"

dir="$(mktemp -d /tmp/cclo.XXXXXX)"
printf 'runtime_dir: %s/run\npeer_port: 0\ndata_port: 0\nmetrics_port: 0\n' "$dir" >"$dir/cclod.yaml"
"$cclod" --config "$dir/cclod.yaml" >"$dir/out" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid" || true; rm -rf "$dir"' EXIT
for _ in $(seq 300); do
  grep -q "ready: peer" "$dir/out" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "ready: peer" "$dir/out"; then
  echo "FAIL: cclod did not become ready:"
  cat "$dir/out"
  exit 1
fi
idle="$(ls "/proc/$pid/task" | wc -l)"
waiting="$(awk '/^ *waiting_calls:/ { sum += $2 } END { print sum + 0 }' "$config")"
tasks="$(sed -n 's/^TasksMax=//p' "$unit")"
if [ -z "$tasks" ] || [ "$tasks" -lt $((idle + waiting + 64)) ]; then
  echo "FAIL: TasksMax=${tasks} is below ${idle} idle threads + ${waiting} waiting calls + 64"
  exit 1
fi
echo "PASS: TasksMax=${tasks} holds ${idle} idle threads + ${waiting} waiting calls + 64"
oom="$(sed -n 's/^OOMScoreAdjust=//p' "$unit")"
if [ -z "$oom" ] || [ "$oom" -ge 0 ] || [ "$oom" -le -1000 ]; then
  echo "FAIL: OOMScoreAdjust=${oom} is not between -1000 and 0 (both excluded)"
  exit 1
fi
echo "PASS: OOMScoreAdjust=${oom}"
