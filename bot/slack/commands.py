"""Slash commands. Acknowledged at once with an ephemeral answer (Slack's 3-second rule).

`/history` and `/approvals` are declared in manifest.yml; their views arrive with the history
issue. Until then they answer honestly instead of letting Slack show "dispatch_failed".
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncAck, AsyncApp

NOT_YET = (
    "`{command}` is not available in this version of Countersign yet. "
    "Your conversations are being recorded and will show up here once it is."
)


def register(app: AsyncApp) -> None:
    async def not_yet(ack: AsyncAck, command: dict[str, str]) -> None:
        await ack(response_type="ephemeral", text=NOT_YET.format(command=command["command"]))

    app.command("/history")(not_yet)
    app.command("/approvals")(not_yet)
