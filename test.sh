#!/usr/bin/env bash
# Run the whole test suite, SQLite and PostgreSQL tests alike. PostgreSQL tests use
# TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test). Extra arguments go
# to pytest, e.g. ./test.sh -k streaming
set -euo pipefail
source "$(dirname "$0")/scripts/bootstrap.sh"
bootstrap
exec "$UV" run --frozen pytest "$@"
