"""Which mentions cost a Slack read to find their files (conversations.replies may be Tier 1)."""

from __future__ import annotations

from bot.conversation.incoming import parse_event

FILE = {"id": "F1", "name": "report.csv", "url_private": "https://files.slack.com/x/report.csv"}


def _body(event: dict[str, object]) -> dict[str, object]:
    base = {"channel": "C1", "user": "UALICE", "ts": "1700000000.000100", "text": "<@UBOT> hi"}
    return {"team_id": "T1", "event_id": "Ev1", "event": {**base, **event}}


def test_a_mention_that_lists_its_files_is_not_read_again() -> None:
    listed = parse_event(_body({"type": "app_mention", "files": [FILE]}), "UBOT")
    assert listed is not None
    assert listed.files == (FILE,)
    assert not listed.fetch_files


def test_a_mention_without_files_is_read_for_them() -> None:
    bare = parse_event(_body({"type": "app_mention"}), "UBOT")
    assert bare is not None
    assert bare.fetch_files
    assert bare.files == ()


def test_a_message_event_is_never_read_again() -> None:
    message = parse_event(_body({"type": "message", "channel_type": "channel"}), "UBOT")
    assert message is not None
    assert not message.fetch_files


def test_junk_in_files_is_left_out() -> None:
    junk = parse_event(_body({"type": "message", "files": ["x", 3, FILE]}), "UBOT")
    assert junk is not None
    assert junk.files == (FILE,)
