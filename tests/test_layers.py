"""The package imports in one direction: no two of bot's packages (or top-level modules) import
each other, directly or around a loop, and the lower layers never reach the Slack surface.
Read from the source with `ast` (imports inside functions and TYPE_CHECKING blocks count too:
a loop hidden in a function is still a loop)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import bot

ROOT = Path(bot.__file__).parent
LOWER = ("approvals", "tools", "db", "records", "policy", "files", "spend")


def node_of(module: str) -> str:
    """`bot.slack.cards` -> `slack`; a top-level module is a node of its own: `bot.errors`."""
    parts = module.split(".")
    if len(parts) > 1 and (ROOT / parts[1]).is_dir():
        return parts[1]
    return ".".join(parts[:2])


def module_imports() -> dict[str, set[str]]:
    """module -> the bot modules it imports."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bot"):
                if node.module == "bot":  # from bot import listeners
                    found[module] |= {f"bot.{a.name}" for a in node.names}
                else:
                    found[module].add(node.module)
            elif isinstance(node, ast.Import):
                found[module] |= {a.name for a in node.names if a.name.startswith("bot.")}
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def test_packages_import_each_other_in_one_direction_only() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for module, imported in module_imports().items():
        for target in imported:
            if node_of(target) != node_of(module):
                edges[node_of(module)].add(node_of(target))
    assert cycles(edges) == []


def test_lower_layers_never_import_the_slack_surface() -> None:
    reaching = sorted(
        f"{module} -> {target}"
        for module, imported in module_imports().items()
        if node_of(module) in LOWER
        for target in imported
        if node_of(target) == "slack"
    )
    assert reaching == []


def test_the_reply_paths_do_not_import_each_other_in_a_circle() -> None:
    """Inside bot/slack: the streamer and its native and edit halves, module by module."""
    edges = {m: {t for t in ts if t.startswith("bot.slack.")} for m, ts in module_imports().items()}
    assert [c for c in cycles(edges) if any(m.startswith("bot.slack.") for m in c)] == []
