#!/usr/bin/env bash
# promtool accepts the shipped scrape config (with the alert rules it loads) and the rules,
# and the rules pass their unit tests (alerts_test.yml: each alert fires when it should).
# Usage: prometheus_files_test.sh <prometheus.yml> <alerts.yml> <alerts_test.yml>
set -euo pipefail
promtool check config "$1"
promtool check rules "$2"
promtool test rules "$3"
