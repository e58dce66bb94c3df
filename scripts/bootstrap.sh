#!/usr/bin/env bash
# Sourced by ./run.sh and ./test.sh: make sure uv is there and the locked environment is in
# .venv. Needs only Python 3.11+; uv is installed into .tools/ if it is not on PATH.
set -euo pipefail

UV_VERSION="0.13.8"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if command -v uv >/dev/null 2>&1; then
  UV="$(command -v uv)"
else
  UV="$root/.tools/bin/uv"
  if [ ! -x "$UV" ]; then
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
      echo "Countersign needs Python 3.11 or newer as python3." >&2; exit 2; }
    echo "Installing uv $UV_VERSION into .tools/ ..." >&2
    python3 -m venv .tools
    .tools/bin/pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
  fi
fi
export UV
# Install exactly what uv.lock says; --frozen refuses to silently re-resolve.
"$UV" sync --frozen --quiet "$@"
