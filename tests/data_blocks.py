"""What a prompt's data block holds (`bot.provenance.delimit`): tests that read a tool's
result from what the fake model received read it through `unwrapped`."""

from __future__ import annotations

import re

_BLOCK = re.compile(r'\A<data source="[^"\n]*">\n(.*)\n</data>(\n\[[^\n]*\])?\Z', re.DOTALL)


def unwrapped(content: str) -> str:
    """The text inside one data block (with a cut note after it, if any); other text as is."""
    found = _BLOCK.match(content)
    return found.group(1) + (found.group(2) or "") if found else content


def is_data(content: str) -> bool:
    return _BLOCK.match(content) is not None
