"""The sandbox is just another Slack to the bot: the bot never imports it, and it imports
neither the bot nor the tests (which are not shipped)."""

from __future__ import annotations

import ast
from pathlib import Path

import bot
import sandbox


def imported(package: Path) -> set[tuple[str, str]]:
    """(module file, imported module) for every import in the package's source."""
    found: set[tuple[str, str]] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add((path.name, node.module))
            elif isinstance(node, ast.Import):
                found |= {(path.name, a.name) for a in node.names}
    return found


def test_the_bot_never_imports_the_sandbox() -> None:
    root = Path(bot.__file__).parent
    assert not [i for i in imported(root) if i[1].split(".")[0] == "sandbox"]
    # `countersign try` starts it as a process of its own
    assert '"-m", "sandbox"' in (root / "__main__.py").read_text(encoding="utf-8")


def test_the_sandbox_imports_neither_the_bot_nor_the_tests() -> None:
    root = Path(sandbox.__file__).parent
    assert not [i for i in imported(root) if i[1].split(".")[0] in ("bot", "tests")]


def test_the_page_ships_with_the_package() -> None:
    static = Path(sandbox.__file__).parent / "static"
    assert {"index.html", "app.js", "render.js", "style.css"} <= {p.name for p in static.iterdir()}
