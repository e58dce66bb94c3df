"""Each argument's kind and label, read from a tool's JSON schema (built-in packs and MCP)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.tools.field_kinds import Kind, field_kinds, label_of
from bot.tools.packs.slack.arguments import ScheduleMessage
from bot.tools.packs.tasks.arguments import UpdateTask


def kinds(schema: dict[str, object]) -> dict[str, Kind]:
    return {f.name: f.kind for f in field_kinds(schema)}


def test_the_built_in_packs_fields_read_as_people_channels_dates_and_choices() -> None:
    assert kinds(UpdateTask.model_json_schema()) == {
        "task_id": Kind.INTEGER,
        "title": Kind.TEXT,
        "description": Kind.TEXT,
        "assignee": Kind.USER,
        "due_date": Kind.DATE,
        "priority": Kind.CHOICE,
        "status": Kind.CHOICE,
    }
    assert kinds(ScheduleMessage.model_json_schema()) == {
        "channel": Kind.CHANNEL,
        "text": Kind.TEXT,
        "post_at": Kind.DATETIME,
    }


def test_an_mcp_schema_says_slack_ids_by_extension_and_lists_by_items() -> None:
    schema = {
        "type": "object",
        "required": ["who"],
        "properties": {
            "who": {"type": "string", "x-slack": "user"},
            "where": {"type": ["string", "null"], "x-slack": "channel"},
            "watchers": {
                "type": "array",
                "items": {"type": "string", "pattern": "^[UW][A-Z0-9]+$"},
            },
            "labels": {"type": "array", "items": {"type": "string"}},
            "urgent": {"type": "boolean"},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
            "meta": {"type": "object"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
    }
    found = {f.name: f for f in field_kinds(schema)}
    assert {n: f.kind for n, f in found.items()} == {
        "who": Kind.USER,
        "where": Kind.CHANNEL,
        "watchers": Kind.USERS,
        "labels": Kind.LIST,
        "urgent": Kind.BOOLEAN,
        "ratio": Kind.NUMBER,
        "meta": Kind.OTHER,
        "either": Kind.OTHER,
    }
    assert found["who"].required
    assert not found["where"].required
    assert (found["ratio"].minimum, found["ratio"].maximum) == (0, 1)


def test_labels_are_words() -> None:
    assert label_of("due_date") == "Due date"
    assert label_of("taskId") == "Task ID"
    assert label_of("in_progress") == "In progress"
    assert label_of("html_url") == "Html URL"


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        ),
    )
)
def test_any_schema_reads_without_error(properties: dict[str, object]) -> None:
    for found in field_kinds({"type": "object", "properties": properties}):
        assert found.label
        assert isinstance(found.kind, Kind)
