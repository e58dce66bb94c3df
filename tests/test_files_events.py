"""A message's files are the ones its event lists, an `app_mention`'s as a `message`'s: no
mention costs a Slack read to find them (conversations.replies may be Tier 1)."""

from __future__ import annotations

from bot.conversation.incoming import parse_event

FILE = {"id": "F1", "name": "report.csv", "url_private": "https://files.slack.com/x/report.csv"}


def _body(event: dict[str, object]) -> dict[str, object]:
    base = {"channel": "C1", "user": "UALICE", "ts": "1700000000.000100", "text": "<@UBOT> hi"}
    return {"team_id": "T1", "event_id": "Ev1", "event": {**base, **event}}


def test_a_mention_lists_its_files() -> None:
    listed = parse_event(_body({"type": "app_mention", "files": [FILE]}), "UBOT")
    assert listed is not None
    assert listed.files == (FILE,)


def test_a_mention_without_files_has_none() -> None:
    bare = parse_event(_body({"type": "app_mention"}), "UBOT")
    assert bare is not None
    assert bare.files == ()


def test_a_message_event_lists_its_files_alike() -> None:
    message = parse_event(
        _body({"type": "message", "channel_type": "channel", "files": [FILE]}), "UBOT"
    )
    assert message is not None
    assert message.files == (FILE,)


def test_junk_in_files_is_left_out() -> None:
    junk = parse_event(_body({"type": "message", "files": ["x", 3, FILE]}), "UBOT")
    assert junk is not None
    assert junk.files == (FILE,)
