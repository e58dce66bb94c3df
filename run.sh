#!/usr/bin/env bash
# Start the bot: Socket Mode when SLACK_APP_TOKEN is set, else HTTP mode on port 3000.
# Without Slack settings (no SLACK_BOT_TOKEN in the environment or .env) it starts the sandbox
# instead: a local Slack-like page at http://127.0.0.1:${SANDBOX_PORT:-3000} with the bot
# running against it (`./run.sh try` does that explicitly).
# Settings come from the environment or .env (see docs/settings.md). Extra arguments go to
# `countersign`, e.g. ./run.sh serve --port 8080
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh
bootstrap --no-dev
has_slack_settings() {
  [ -n "${SLACK_BOT_TOKEN:-}" ] && return 0
  [ -f .env ] && grep -Eq '^[[:space:]]*(export[[:space:]]+)?SLACK_BOT_TOKEN=[^[:space:]]' .env
}
if [ "$#" -eq 0 ]; then
  if has_slack_settings; then set -- run; else set -- try; fi
fi
case "$1" in  # Python takes a few seconds to load the bot before it can say anything itself
  try) echo "Starting the sandbox ..." >&2 ;;
  run | serve) echo "Starting Countersign ..." >&2 ;;
esac
exec "$UV" run --frozen --no-dev countersign "$@"
