#!/usr/bin/env bash
# Sourced by ./run.sh, ./test.sh and .ci/run, which then call `bootstrap [uv sync options]`:
# make sure uv is there and the locked environment is in .venv. Needs only Python 3.11+; uv is
# installed into .tools/ if it is not on PATH. Sets UV to the uv executable.

UV_VERSION="0.13.8"
COUNTERSIGN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

bootstrap() {
  cd "$COUNTERSIGN_ROOT"
  if command -v uv >/dev/null 2>&1; then
    UV="$(command -v uv)"
  else
    UV="$COUNTERSIGN_ROOT/.tools/bin/uv"
    if [ ! -x "$UV" ]; then
      python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
        echo "Countersign needs Python 3.11 or newer as python3." >&2
        exit 2
      }
      echo "Installing uv $UV_VERSION into .tools/ ..." >&2
      python3 -m venv .tools
      .tools/bin/pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
    fi
  fi
  export UV
  # Install exactly what uv.lock says; --frozen refuses to silently re-resolve. uv says nothing
  # (--quiet) and takes a while when .venv is new or the lock changed: say so, only then.
  local stamp=".venv/.countersign-synced" wanted
  wanted="$(cat uv.lock pyproject.toml | cksum) $*"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    echo "Installing dependencies into .venv (the first time takes a minute or two) ..." >&2
    "$UV" sync --frozen --quiet "$@"
    printf '%s\n' "$wanted" 2>/dev/null >"$stamp" || true  # no stamp: said again next time
    echo "Dependencies installed." >&2
  else
    "$UV" sync --frozen --quiet "$@"
  fi
}
