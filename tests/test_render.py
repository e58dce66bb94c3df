"""Model Markdown as Slack shows it, with every mention and broadcast neutralised."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.slack.render import to_mrkdwn, unescape
from bot.slack.split import split_message


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __bold__", "*bold* and *bold*"),
        ("*italic* and _italic_", "_italic_ and _italic_"),
        ("~~gone~~", "~gone~"),
        ("`a < b`", "`a &lt; b`"),
        ("[docs](https://example.com/x?a=1&b=2)", "<https://example.com/x?a=1&amp;b=2|docs>"),
        ("<https://example.com>", "<https://example.com>"),
        ("[evil](https://x.com/a|b>c)", "<https://x.com/a%7Cb%3Ec|evil>"),
        ("[relative](/path)", "relative"),
        ("# Heading\ntext", "*Heading*\n\ntext"),
        ("- a\n- b\n  - c", "• a\n• b\n    ◦ c"),
        ("3. x\n4. y", "3. x\n4. y"),
        ("> quoted **bit**", "> quoted *bit*"),
        ("```python\nif a < b:\n    pass\n```", "```\nif a &lt; b:\n    pass\n```"),
        ("line one\nline two", "line one\nline two"),
        ("| a | b |\n|---|---|\n| 1 | 22 |", "```\na  b\n1  22\n```"),
        ("plain & simple", "plain &amp; simple"),
    ],
)
def test_markdown_becomes_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


@pytest.mark.parametrize(
    "hostile",
    [
        "<!channel>",
        "<!here>",
        "<!everyone>",
        "<@U123ABC>",
        "<!subteam^S0123|@devs>",
        "<#C123|general>",
        "`<!channel>`",
        "```\n<!here>\n```",
        "[<!channel>](https://x.io)",
        "**<!everyone>**",
        "<!date^1392734382^{date}|x>",
    ],
)
def test_mentions_from_the_model_never_reach_slack_as_syntax(hostile: str) -> None:
    rendered = to_mrkdwn(f"hey {hostile} there")
    for syntax in ("<!", "<@", "<#"):
        assert syntax not in rendered
    assert "&lt;" in rendered


def test_incoming_text_is_unescaped_for_the_model() -> None:
    assert unescape("a &lt;b&gt; &amp;amp; c") == "a <b> &amp; c"


def test_long_text_splits_on_word_boundaries_and_loses_nothing() -> None:
    text = " ".join(f"word{i}" for i in range(5000))
    chunks = split_message(text, 3500)
    assert all(len(c) <= 3500 for c in chunks)
    assert " ".join(chunks) == text


def test_split_never_cuts_an_entity_and_reopens_code_blocks() -> None:
    body = "\n".join(f"row {i} &amp; &lt;x&gt;" for i in range(800))
    text = "intro\n\n```\n" + body + "\n```\noutro"
    chunks = split_message(text, 1000)
    assert all(len(c) <= 1000 for c in chunks)
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0  # every piece renders its code as code
        for piece in chunk.split("&")[1:]:
            assert piece.startswith(("amp;", "lt;", "gt;"))
    joined = "\n".join(chunks).replace("\n```\n```\n", "\n")
    assert joined == text


def test_split_handles_text_without_any_space() -> None:
    text = "x" * 9000 + "&amp;" + "y" * 100
    chunks = split_message(text, 3000)
    assert all(len(c) <= 3000 for c in chunks)
    assert "".join(chunks) == text


@given(
    st.lists(
        st.sampled_from(["word", "&amp;", "&lt;x&gt;", " ", "\n", "\n\n", "```", "é🙂", "x" * 50]),
        max_size=400,
    ),
    st.integers(min_value=200, max_value=1000),
)
def test_splitting_keeps_every_character_and_every_limit(parts: list[str], limit: int) -> None:
    text = "".join(parts)
    chunks = split_message(text, limit)
    assert all(len(c) <= limit for c in chunks)
    for chunk in chunks:  # no entity is cut in two
        for piece in chunk.split("&")[1:]:
            assert piece.startswith(("amp;", "lt;", "gt;"))

    # Only separators at cuts and the fences added around cuts may differ.
    def squash(value: str) -> str:
        return "".join(value.replace("```", "").split())

    assert squash("".join(chunks)) == squash(text)


@given(
    st.lists(
        st.sampled_from(
            [
                "<!channel>",
                "<!here|here>",
                "<@U1>",
                "<#C1|x>",
                "<!subteam^S1>",
                "[a](",
                "https://x.io",
                ")",
                "**",
                "_",
                "`",
                "```",
                "\n",
                " ",
                "&",
                "<",
                ">",
                "|",
                "- ",
                "1. ",
                "> ",
                "# ",
                "text",
            ]
        ),
        max_size=60,
    )
)
def test_no_markdown_input_can_produce_a_mention(parts: list[str]) -> None:
    rendered = to_mrkdwn("".join(parts))
    for syntax in ("<!", "<@", "<#"):
        assert syntax not in rendered


SPANS = [
    "<https://example.com/a?b=c|the release notes>",
    "*bold words here*",
    "_italic words here_",
    "~struck words here~",
    "`code words here`",
    "<https://example.com/very/long/path/that/goes/on|a link with a long label>",
]


@given(
    st.lists(
        st.one_of(
            st.sampled_from(SPANS),
            st.sampled_from(["word", "snake_case_name", "a*b", "x" * 30]),
        ),
        min_size=50,
        max_size=300,
    ),
    st.integers(min_value=200, max_value=900),
)
def test_split_never_cuts_a_link_or_a_formatted_span(parts: list[str], limit: int) -> None:
    """Each link and each bold, italic, struck or code span lands whole in one message: cut
    in two, both halves would show raw syntax and the link would point nowhere."""
    text = " ".join(parts)
    chunks = split_message(text, limit)
    assert all(len(c) <= limit for c in chunks)
    for span in SPANS:
        whole = sum(chunk.count(span) for chunk in chunks)
        assert whole == text.count(span), span
    assert "".join("".join(chunks).split()) == "".join(text.split())


def test_a_link_near_the_limit_moves_whole_to_the_next_message() -> None:
    link = "<https://example.com/docs?page=2|the deployment guide for staging>"
    text = "see " + "word " * 150 + link + " and more"
    chunks = split_message(text, 800)
    assert any(link in chunk for chunk in chunks)
