"""The Edit modal's builder and reader on schemas a team's MCP server may send: a value a
control cannot show is edited as text, every modal stays within Slack's documented limits
(the fake checks them as Slack does), and a form saved untouched keeps every value."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack.edit_form import edit_fields, edit_modal
from bot.slack.edit_values import read_submission
from bot.slack.edit_words import schema_errors
from bot.tools.registry import Outcome, Preview, Tool, ToolContext
from bot.tools.schema_arguments import SchemaArguments, problems
from tests.fakes.block_elements import ElementError, check_input_element
from tests.fakes.slack import check_view
from tests.fakes.view_state import view_state


async def _run(arguments: SchemaArguments, ctx: ToolContext) -> Outcome:
    return Outcome({}, "done")


async def _preview(arguments: SchemaArguments, ctx: ToolContext) -> Preview:
    return Preview("do it")


def mcp_tool(properties: dict[str, Any], required: list[str] | None = None) -> Tool[Any]:
    schema = {"type": "object", "properties": properties, "required": required or []}
    return Tool(
        name="files__do",
        description="do",
        arguments=SchemaArguments,
        run=_run,
        preview=_preview,
        input_schema=schema,
    )


def elements(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b["element"] for b in view["blocks"] if b["type"] == "input"}


def test_a_value_its_control_cannot_show_is_edited_as_text() -> None:
    many = [f"choice {n}" for n in range(120)]
    tool = mcp_tool(
        {
            "who": {"type": "string", "x-slack": "user"},
            "where": {"type": "string", "x-slack": "channel"},
            "many": {"type": "string", "enum": many},
            "sneaky": {"type": "string", "enum": ["open", "open\u200b"]},
            "when": {"type": "string", "format": "date-time"},
            "fine": {"type": "string", "x-slack": "user"},
        }
    )
    current = {
        "who": "alice",  # a name, not an id: no picker could show it
        "where": "#general",
        "many": "choice 7",
        "sneaky": "open\u200b",
        "when": "1969-07-20T20:17:00Z",
        "fine": "UBOB",
    }
    view = edit_modal("1:1", edit_fields(tool, current))
    check_view(view)
    shown = elements(view)
    assert {k: e["type"] for k, e in shown.items()} == {
        "who": "plain_text_input",
        "where": "plain_text_input",
        "many": "plain_text_input",  # more than a menu holds
        "sneaky": "plain_text_input",  # a menu could not show the hidden character
        "when": "plain_text_input",  # before what the picker holds
        "fine": "multi_users_select",
    }
    assert shown["who"]["initial_value"] == "alice"
    assert shown["when"]["initial_value"] == "1969-07-20T20:17:00Z"


@pytest.mark.parametrize(
    ("element", "problem"),
    [
        (
            {
                "type": "static_select",
                "options": [{"text": {"type": "plain_text", "text": "A"}, "value": "a"}],
                "initial_option": {"text": {"type": "plain_text", "text": "B"}, "value": "b"},
            },
            "one of the options",
        ),
        (
            {
                "type": "static_select",
                "options": [
                    {"text": {"type": "plain_text", "text": str(n)}, "value": str(n)}
                    for n in range(101)
                ],
            },
            "1 to 100 options",
        ),
        ({"type": "datepicker", "initial_date": "24/12/2026"}, "YYYY-MM-DD"),
        ({"type": "datetimepicker", "initial_date_time": "1766570400"}, "unix seconds"),
        ({"type": "number_input", "is_decimal_allowed": False, "initial_value": 3}, "as text"),
        ({"type": "users_select", "placeholder": {"type": "plain_text", "text": "x" * 151}}, "150"),
        ({"type": "conversations_select", "filter": {"include": ["everything"]}}, "filter"),
    ],
)
def test_the_fake_refuses_what_slack_documents_as_invalid(
    element: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ElementError, match=problem):
        check_input_element({**element, "action_id": "value"})


@settings(max_examples=60, deadline=None)
@given(
    choices=st.lists(st.text(max_size=160), min_size=1, max_size=110, unique=True),
    pick=st.integers(min_value=0, max_value=200),
    number=st.one_of(st.none(), st.integers(-(10**12), 10**12), st.floats(-1e6, 1e6)),
    when=st.one_of(st.none(), st.datetimes(timezones=st.just(UTC))),
    person=st.one_of(st.none(), st.from_regex(r"[UW][A-Z0-9]{1,12}", fullmatch=True)),
)
def test_any_modal_fits_slack_and_saving_it_untouched_keeps_every_value(
    choices: list[str], pick: int, number: float | None, when: Any, person: str | None
) -> None:
    tool = mcp_tool(
        {
            "choice": {"type": "string", "enum": choices},
            "number": {"type": ["number", "null"]},
            "when": {"type": ["string", "null"], "format": "date-time"},
            "person": {"type": ["string", "null"], "x-slack": "user"},
            "flag": {"type": "boolean"},
            "maybe": {"type": ["boolean", "null"]},
        },
        required=["choice", "flag"],
    )
    current = {
        "choice": choices[pick % len(choices)],
        "number": number,
        "when": when.isoformat() if when is not None else None,
        "person": person,
        "flag": bool(pick % 2),
        "maybe": [None, True, False][pick % 3],
    }
    fields = edit_fields(tool, current)
    view = edit_modal("1:1", fields)
    check_view(view)
    state = {block: entry["value"] for block, entry in view_state(view, {}).items()}
    read = read_submission(state, fields, tool.input_schema or {})
    assert read.errors == {}
    kept = {name: current[name] for name in read.unchanged}
    after = {**read.values, **kept}  # what the edit would send (an absent field: None)
    assert {name: after.get(name) for name in current} == current


def test_a_schemas_problems_read_as_sentences_on_their_fields() -> None:
    tool = mcp_tool(
        {
            "code": {"type": "string", "pattern": "^[a-z]+$"},
            "title": {"type": "string", "maxLength": 20},
            "when": {"type": "string", "format": "date"},
            "size": {"type": "integer", "minimum": 1},
        },
        required=["title"],
    )
    kinds = [f.kind for f in edit_fields(tool, {})]
    from_server = {"code": "ABC", "size": 0, "when": "soon"}
    found = "; ".join(problems(tool.input_schema or {}, from_server))
    assert schema_errors(found, kinds, "code") == {
        "code": "Code is not in a form this tool accepts",
        "title": "Title is required",
        "size": "Size must be a whole number of at least 1",
    }
    too_long = "; ".join(problems(tool.input_schema or {}, {"title": "x" * 21}))
    assert schema_errors(too_long, kinds, "code") == {
        "title": "Title must be at most 20 characters"
    }
    odd = schema_errors("arguments: Additional properties are not allowed", kinds, "code")
    assert odd == {"code": "These values do not fit what the tool accepts, so nothing changed."}
