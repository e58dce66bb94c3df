#!/usr/bin/env bash
# A plain `pip install .` (no uv, no lock file) must give a working install: the package's own
# metadata has to carry every constraint. uv honoured a constraint pip never saw, and a
# pip-installed GitHub pack failed to import. Installs into a throw-away venv, imports every
# module of the installed package from outside the checkout, and runs the CLI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install --quiet --disable-pip-version-check "$root"
cd "$scratch"  # not the checkout: the installed package is what gets imported
"$scratch/venv/bin/python" - <<'PY'
import importlib
import pkgutil

from importlib import resources

import bot
import sandbox

names = [
    m.name
    for m in pkgutil.walk_packages(bot.__path__, "bot.")
    if ".migrations" not in m.name
] + [m.name for m in pkgutil.walk_packages(sandbox.__path__, "sandbox.")]
for name in names:
    importlib.import_module(name)
# The sandbox's page ships with it (`countersign try` serves it).
assert (resources.files("sandbox") / "static" / "index.html").is_file(), "no sandbox page"
print(f"pip install: imported {len(names)} modules of the installed package")
PY
"$scratch/venv/bin/countersign" --help >/dev/null
set +e
out="$(env -i PATH="$PATH" HOME="$scratch" "$scratch/venv/bin/countersign" doctor 2>&1)"
code=$?
set -e
if [ "$code" -ne 2 ] || ! grep -q "SLACK_BOT_TOKEN" <<<"$out"; then
  echo "pip install: 'countersign doctor' without settings should name SLACK_BOT_TOKEN and exit 2 (got $code):" >&2
  echo "$out" >&2
  exit 1
fi
echo "pip install: the CLI runs and names missing settings"
