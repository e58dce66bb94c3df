"""The model's Markdown, rendered the way Slack shows it (mrkdwn), with mentions neutralised.

Every piece of model text goes through `escape`, which turns `&`, `<`, `>` into entities: Slack
then shows `<!channel>`, `<@U123>` or `<!subteam^S1>` literally instead of pinging anyone. The
only `<…>` this module emits are links it builds itself from Markdown links.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token

from bot.text import escape, unescape

__all__ = ["escape", "to_mrkdwn", "unescape"]

_parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _link_target(url: str) -> str:
    # A `|` or `>` inside the URL would end Slack's link syntax early.
    return escape(url).replace("|", "%7C")


def _inline(tokens: Sequence[Token]) -> str:
    out: list[str] = []
    link_stack: list[tuple[str, int, bool]] = []
    for tok in tokens:
        kind = tok.type
        if kind == "text":
            out.append(escape(tok.content))
        elif kind == "code_inline":
            out.append("`" + escape(tok.content) + "`")
        elif kind in ("strong_open", "strong_close"):
            out.append("*")
        elif kind in ("em_open", "em_close"):
            out.append("_")
        elif kind in ("s_open", "s_close"):
            out.append("~")
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "link_open":
            autolink = tok.markup == "autolink"
            link_stack.append((str(tok.attrGet("href") or ""), len(out), autolink))
        elif kind == "link_close" and link_stack:
            href, start, autolink = link_stack.pop()
            label = "".join(out[start:])
            del out[start:]
            if href.startswith(("http://", "https://")):
                target = _link_target(href)
                plain = escape(href)
                out.append(f"<{target}>" if label in (plain, "") else f"<{target}|{label}>")
            elif autolink:  # <x@y> or <mailto:…>: show what was written, inert
                out.append(f"&lt;{label}&gt;")
            else:
                out.append(label)
        elif kind == "image":
            src = str(tok.attrGet("src") or "")
            alt = escape(tok.content or "image")
            if src.startswith(("http://", "https://")):
                out.append(f"<{_link_target(src)}|{alt}>")
            else:
                out.append(alt)
        elif kind in ("html_inline",):
            out.append(escape(tok.content))
        elif tok.children:
            out.append(_inline(tok.children))
    return "".join(out)


def _table(tokens: Sequence[Token]) -> str:
    """Slack has no tables: show the rows as aligned text in a code block."""
    rows: list[list[str]] = []
    row: list[str] = []
    for tok in tokens:
        if tok.type == "tr_open":
            row = []
        elif tok.type == "inline":
            row.append(tok.content.strip())
        elif tok.type == "tr_close":
            rows.append(row)
    width = [max((len(r[i]) for r in rows if i < len(r)), default=0) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width[i]) for i, cell in enumerate(r) if i < len(width)).rstrip()
        for r in rows
    ]
    return "```\n" + escape("\n".join(lines)) + "\n```"


class _Renderer:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.blocks: list[tuple[str, str]] = []  # (separator before it, text)
        self.new_list = False
        self.lists: list[list[int | None]] = []  # per nesting level: [next ordinal or None]
        self.quote = 0
        self.pending_item: str | None = None

    def _emit(self, text: str) -> None:
        # Lines of one list stay together; any other block gets a blank line before it.
        separator = "\n" if self.lists and not self.new_list else "\n\n"
        self.new_list = False
        self.blocks.append((separator, self._format(text)))

    def _format(self, text: str) -> str:
        prefix = "> " * self.quote
        if self.pending_item is not None:
            indent = "    " * (len(self.lists) - 1)
            lines = text.split("\n")
            first = f"{prefix}{indent}{self.pending_item} {lines[0]}"
            rest = [f"{prefix}{indent}   {line}" if line else "" for line in lines[1:]]
            self.pending_item = None
            return "\n".join([first, *rest])
        if self.lists:
            indent = "    " * (len(self.lists) - 1) + "   "
            text = "\n".join(indent + line if line else line for line in text.split("\n"))
        if prefix:
            text = "\n".join(prefix + line for line in text.split("\n"))
        return text

    def render(self) -> str:
        i = 0
        tokens = self.tokens
        while i < len(tokens):
            tok = tokens[i]
            kind = tok.type
            if kind == "inline":
                self._emit(_inline(tok.children or []))
            elif kind == "heading_open":
                inline = tokens[i + 1]
                self._emit("*" + _inline(inline.children or []) + "*")
                i += 2
            elif kind in ("fence", "code_block"):
                body = tok.content[:-1] if tok.content.endswith("\n") else tok.content
                self._emit("```\n" + escape(body) + "\n```")
            elif kind == "bullet_list_open":
                self.new_list = not self.lists
                self.lists.append([None])
            elif kind == "ordered_list_open":
                self.new_list = not self.lists
                start = tok.attrGet("start")
                self.lists.append([int(str(start)) if start is not None else 1])
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.lists.pop()
            elif kind == "list_item_open":
                level = self.lists[-1]
                if level[0] is None:
                    self.pending_item = "•" if len(self.lists) % 2 else "◦"
                else:
                    self.pending_item = f"{level[0]}."
                    level[0] += 1
            elif kind == "list_item_close":
                if self.pending_item is not None:  # an empty item
                    self._emit("")
            elif kind == "blockquote_open":
                self.quote += 1
            elif kind == "blockquote_close":
                self.quote -= 1
            elif kind == "hr":
                self._emit("──────────")
            elif kind == "table_open":
                end = i
                while tokens[end].type != "table_close":
                    end += 1
                self._emit(_table(tokens[i:end]))
                i = end
            elif kind == "html_block":
                self._emit(escape(tok.content.rstrip("\n")))
            i += 1
        return self._join()

    def _join(self) -> str:
        return "".join(sep + text for sep, text in self.blocks).lstrip("\n")


def to_mrkdwn(markdown: str) -> str:
    """Render Markdown (as LLMs write it) into Slack mrkdwn, safely escaped."""
    if not markdown.strip():
        return ""
    return _Renderer(_parser.parse(markdown)).render()
