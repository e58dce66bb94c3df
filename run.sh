#!/usr/bin/env bash
# Start the bot: Socket Mode when SLACK_APP_TOKEN is set, else HTTP mode on port 3000.
# Settings come from the environment or .env (see README.md). Extra arguments go to
# `countersign`, e.g. ./run.sh serve --port 8080
set -euo pipefail
source "$(dirname "$0")/scripts/bootstrap.sh"
bootstrap --no-dev
if [ "$#" -eq 0 ]; then set -- run; fi
exec "$UV" run --frozen --no-dev countersign "$@"
