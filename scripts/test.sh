#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test. The last line is
# "N passed, N failed", counting test cases across all test targets; a case that skipped
# itself (GTEST_SKIP: no network namespaces here) is neither, and is named on a line before.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }

if ! bazel build //...; then
  echo "build failed"
  echo "0 passed, 1 failed"
  exit 1
fi
# The run's own results, listed in its build events: bazel-testlogs/ may also hold those of
# targets since removed or renamed, and of earlier --runs_per_test runs.
events=$(mktemp)
trap 'rm -f "$events"' EXIT
bazel test //... --test_output=errors --build_event_json_file="$events"
bazel_status=$?

passed=0
failed=0
skipped=()
while IFS= read -r -d '' xml; do
  tests=$(grep -o -m1 'tests="[0-9]*"' "$xml" | head -1 | tr -dc 0-9)
  failures=$(grep -o -m1 'failures="[0-9]*"' "$xml" | head -1 | tr -dc 0-9)
  errors=$(grep -o -m1 'errors="[0-9]*"' "$xml" | head -1 | tr -dc 0-9)
  bad=$(( ${failures:-0} + ${errors:-0} ))
  target=$(dirname "${xml#*testlogs/}")
  mapfile -t skips < <(grep -o '<testcase name="[^"]*"[^>]*result="skipped"' "$xml" |
    sed -e "s|<testcase name=\"|${target%/shard_*} |" -e 's|".*||')
  skipped+=("${skips[@]}")
  passed=$(( passed + ${tests:-0} - bad - ${#skips[@]} ))
  failed=$(( failed + bad ))
done < <(grep -o '"name":"test.xml","uri":"file://[^"]*"' "$events" |
  sed -e 's|.*"uri":"file://||' -e 's|"$||' | sort -u | tr '\n' '\0')

# A target that failed without reporting a failing case still counts as one failure.
if [ "$bazel_status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1
fi
if [ "${#skipped[@]}" -gt 0 ]; then
  printf '%s skipped (neither passed nor failed):\n' "${#skipped[@]}"
  printf '  %s\n' "${skipped[@]}"
fi
echo "$passed passed, $failed failed"
[ "$bazel_status" -eq 0 ] && [ "$failed" -eq 0 ]
