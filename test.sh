#!/usr/bin/env bash
# Run the whole test suite, SQLite and PostgreSQL tests alike. PostgreSQL tests use
# TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test). Extra arguments go
# to pytest, e.g. ./test.sh -k streaming
set -euo pipefail
source "$(dirname "$0")/scripts/bootstrap.sh"
bootstrap
# The sandbox's browser tests drive headless Chromium: Debian's package, since Playwright's own
# browser downloads cannot be fetched here (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD keeps it from trying).
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ ! -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "Installing chromium for the sandbox's browser tests ..." >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# The tests start the bot and its CLI as processes of their own many times: let the first one
# leave its bytecode behind (a caller's PYTHONDONTWRITEBYTECODE would have every start compile
# every import again, ~2.5 s each here).
unset PYTHONDONTWRITEBYTECODE
# Four workers (pytest-xdist; TEST_WORKERS=1 for one): the suite mostly waits (on Slack's
# windows, which the fake enforces at the documented floors, on sockets and on processes): on
# two cores two workers used about a quarter of each (1,246 tests: 602 s), four take 328 s.
# Tests share nothing but PostgreSQL (a database of their own each) and Redis (keys of their
# own each), and no test depends on the machine being quiet. `--dist worksteal`: each worker
# starts with a contiguous share (a module's tests, and its one sandbox, stay together) and an
# idle one takes tests from the end of a busy one's (the suite's tests last 0.01 s to 30 s).
exec "$UV" run --frozen pytest -n "${TEST_WORKERS:-4}" --dist worksteal "$@"
