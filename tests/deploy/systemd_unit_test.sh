#!/usr/bin/env bash
# systemd accepts deploy/systemd/cclod.service. `systemd-analyze verify` also checks that
# ExecStart names an executable, and the unit names the installed path
# (/usr/local/bin/cclod), which a build machine lacks; so the test verifies a copy whose
# ExecStart names the cclod just built, every other line unchanged. Any warning fails.
# Usage: systemd_unit_test.sh <cclod.service> <cclod binary>
set -euo pipefail
unit="$1"
cclod="$(realpath "$2")"
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
