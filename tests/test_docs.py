"""The README stays a short front door and the docs/ site stays whole: every relative link and
image resolves (anchors included), every page is in the site's navigation, the settings page
names exactly the settings the bot reads, and the site builds with the generator's strict mode
(which fails on a link to a page or an anchor that does not exist)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import AliasChoices

from bot.config import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 200
OTHER_VARIABLES = "## Other variables"  # settings.md: variables the bot's Settings do not read
# Pages for developers, which may cite test files; every other page is for the people who use
# and run the bot, and says what holds without sending them into tests/.
DEVELOPER_PAGES = {"testing.md", "architecture.md", "benchmarks.md", "one-door.md"}
TEST_CITATION = re.compile(r"tests/|\btest_\w+\.py")

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def prose(text: str) -> str:
    """The text without code blocks and code spans, where `[x](y)` is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def github_slug(heading: str) -> str:
    """GitHub's anchor for a README heading: lower case, punctuation dropped, spaces to '-'."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def site_slug(heading: str) -> str:
    """The site's anchor (Python-Markdown's toc): punctuation dropped, runs of spaces and '-'
    to one '-'."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path, *, github: bool) -> set[str]:
    slug = github_slug if github else site_slug
    return {slug(h) for h in HEADING.findall(FENCE.sub("", page.read_text()))}


def broken_links(page: Path, docs: Path = DOCS) -> list[str]:
    """Each relative link or image of `page` that does not resolve, with why (`docs`: the
    site's folder, whose pages link with the site's anchors and never outside it)."""
    problems = []
    in_docs = docs in page.parents
    for target in LINK.findall(prose(page.read_text())):
        if SCHEME.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(docs.parent)}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
        elif in_docs and docs not in dest.parents:
            problems.append(f"{where}: outside docs/, so the site cannot serve it")
        elif anchor and dest.suffix == ".md":
            if anchor not in anchors(dest, github=not in_docs):
                problems.append(f"{where}: no heading with that anchor")
        elif anchor:
            problems.append(f"{where}: an anchor into a file that is not a page")
    return problems


def nav_pages(node: object) -> list[str]:
    """Every page named in mkdocs.yml's nav, depth first."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for value in node.values() for p in nav_pages(value)]
    if isinstance(node, list):
        return [p for item in node for p in nav_pages(item)]
    return []


def env_names() -> dict[str, set[str]]:
    """Each setting of the bot -> the environment variable names it is read from."""
    names = {}
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            found = {c.upper() for c in alias.choices if isinstance(c, str)}
        elif isinstance(alias, str):
            found = {alias.upper()}
        else:
            found = {field_name.upper()}
        names[field_name] = found
    return names


def settings_rows(text: str) -> list[str]:
    """The variable names in the first column of the page's tables."""
    return re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", text, re.MULTILINE)


def test_the_readme_is_a_short_front_door() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    headings = [h.lower() for h in HEADING.findall(README.read_text())]
    for part in ("try it", "put it in slack", "run the tests", "who approves by default"):
        assert any(part in h for h in headings), f"README.md has no section about {part!r}"
    assert "![" in README.read_text(), "README.md shows no screenshot"


def test_every_relative_link_in_the_readme_and_the_docs_resolves() -> None:
    problems = [p for page in [README, *doc_pages()] for p in broken_links(page)]
    assert not problems, "\n".join(problems)


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    (tmp_path / "outside.md").write_text("# Outside\n")
    (docs / "copy.md").write_text(
        "[a](settings.md#no-such-heading) [b](gone.md) `[c](code-span.md)` ![d](gone.png)\n"
        "[e](../outside.md) [f](settings.md#the-model) [g](https://example.com/x.md)\n"
        "```\n[h](code-block.md)\n```\n"
    )
    assert broken_links(docs / "copy.md", docs) == [
        "docs/copy.md: settings.md#no-such-heading: no heading with that anchor",
        "docs/copy.md: gone.md: no such file",
        "docs/copy.md: gone.png: no such file",
        "docs/copy.md: ../outside.md: outside docs/, so the site cannot serve it",
    ]


def test_pages_for_people_cite_no_test_files() -> None:
    citing = [
        f"{page.name}: {line.strip()}"
        for page in doc_pages()
        if page.name not in DEVELOPER_PAGES
        for line in page.read_text().splitlines()
        if TEST_CITATION.search(line)
    ]
    assert not citing, "\n".join(citing)


def test_every_page_is_in_the_sites_navigation_once() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed)), f"a page is listed twice: {listed}"
    on_disk = {str(p.relative_to(DOCS)) for p in doc_pages()}
    assert set(listed) == on_disk, (
        f"not in the nav: {sorted(on_disk - set(listed))}; "
        f"in the nav but missing: {sorted(set(listed) - on_disk)}"
    )


def test_the_settings_page_names_exactly_the_settings_the_bot_reads() -> None:
    text = (DOCS / "settings.md").read_text()
    assert OTHER_VARIABLES in text
    documented, other = text.split(OTHER_VARIABLES, 1)
    rows = settings_rows(documented)
    duplicates = sorted({name for name in rows if rows.count(name) > 1})
    assert not duplicates, f"listed twice on docs/settings.md: {duplicates}"
    names = env_names()
    missing = sorted(f for f, env in names.items() if not env & set(rows))
    assert not missing, f"settings missing from docs/settings.md: {missing}"
    known = set().union(*names.values())
    unknown = sorted(set(rows) - known)
    assert not unknown, f"docs/settings.md lists what the bot does not read: {unknown}"
    hidden = set(settings_rows(other)) & known
    assert not hidden, f"settings of the bot listed under {OTHER_VARIABLES!r}: {hidden}"


def build_site(tmp_path: Path, *, append_to_status: str = "") -> subprocess.CompletedProcess[str]:
    """Build a copy of the site with the strict flag (the generator keeps its site and cache
    beside mkdocs.yml and wants docs_dir inside that folder, so the copy keeps the repo clean)."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    if append_to_status:
        status = tmp_path / "docs" / "status.md"
        status.write_text(status.read_text() + append_to_status)
    zensical = Path(sys.executable).parent / "zensical"
    if not zensical.exists():
        pytest.fail(f"no {zensical}: the dev dependencies are not installed (uv sync)")
    return subprocess.run(
        [str(zensical), "build", "--strict"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=90,
        check=False,
    )


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    result = build_site(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "settings" / "index.html").exists()
    assert (tmp_path / "site" / "sandbox-card-before-approve.png").exists()


def test_the_strict_build_fails_on_a_link_to_a_missing_anchor(tmp_path: Path) -> None:
    result = build_site(tmp_path, append_to_status="\n[x](settings.md#no-such-heading)\n")
    assert result.returncode != 0
    assert "anchor does not exist" in result.stdout + result.stderr
