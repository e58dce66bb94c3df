"""What each setting should hold, and the one message that says what is wrong with them (every
problem at once, in plain words, never a secret's value)."""

from __future__ import annotations

from typing import Any

# What each variable should hold, used to turn pydantic's errors into plain instructions.
HINTS: dict[str, str] = {
    "SLACK_BOT_TOKEN": "the Bot User OAuth Token (xoxb-…) from the app's OAuth & Permissions page",
    "SLACK_APP_TOKEN": "an app-level token (xapp-…) with connections:write, for Socket Mode",
    "SLACK_SIGNING_SECRET": "the Signing Secret from the app's Basic Information page",
    "SLACK_API_URL": "the Slack Web API base URL ending in /api/, e.g. https://slack.com/api/",
    "OPENAI_API_KEY": "the API key of your OpenAI-compatible server (any text for Ollama)",
    "OPENAI_BASE_URL": "the server's base URL, e.g. https://api.openai.com/v1 or "
    "http://localhost:11434/v1 for Ollama",
    "LLM_MODEL": "the model name, e.g. gpt-4o-mini or llama3.1",
    "DATABASE_URL": "sqlite:///path/to/file.db or postgresql://user:pass@host/db",
    "REDIS_URL": "redis://host:6379/0, or leave unset",
    "SYSTEM_PROMPT": "the system prompt text",
    "POLICY_FILE": "the path of a policy YAML file (version, default, rules)",
    "MODEL_PRICES": "the path of a YAML or JSON file {MODEL: {input: USD, cached_input: USD, "
    "output: USD}} (USD per million tokens)",
    "SYSTEM_PROMPT_FILE": "the path of a readable text file holding the system prompt",
    "HISTORY_WINDOW_MESSAGES": "a whole number of messages, at least 2",
    "TOKEN_BUDGET": "the model's context tokens Countersign may use, e.g. 16000 or 128000",
    "REPLY_TOKENS": "the most tokens one model answer may take (sent as max_tokens), at least 100",
    "TOOL_RESULT_TOKENS": "tokens of one tool result the model sees before it is cut",
    "SUMMARY_TOKENS": "tokens a summary of older turns may take",
    "SLACK_EDIT_BUDGET_PER_MINUTE": "chat.update calls per minute for the workspace, 1 to 600",
    "SLACK_CALL_BUDGET_SCALE": "every other Slack method's documented floor times this, 1 to 100",
    "SLACK_HISTORY_TIER": "Slack's tier for reading threads: 3, or 1 for some apps",
    "SLACK_EDIT_MIN_INTERVAL_SECONDS": "seconds between two edits of one reply, 0.1 to 60",
    "SLACK_MESSAGE_MAX_CHARS": "characters per Slack message before a reply continues, 500-3900",
    "LLM_TIMEOUT_SECONDS": "seconds to wait for the model (per read), 1 to 600",
    "LLM_MAX_RETRIES": "how often the openai SDK retries a failed request, 0 to 10",
    "MODEL_DEADLINE_SECONDS": "seconds one model request may take from sending it to its last "
    "token, 1 to 3600",
    "SHUTDOWN_GRACE_SECONDS": "seconds to let live replies finish on SIGTERM, 0 to 600",
    "LOG_LEVEL": "DEBUG, INFO, WARNING or ERROR",
    "TOOL_PACKS": "comma-separated Python modules with a TOOLS list, e.g. "
    "bot.tools.packs.tasks,bot.tools.packs.slack,mycompany.countersign_tools",
    "APPROVAL_POLICIES": 'JSON such as {"create_task": {"approvers": ["U012AB"], '
    '"approvals_required": 2, "four_eyes": true}} (see docs/approvals.md)',
    "PROPOSAL_EXPIRY_MINUTES": "minutes an approval card waits before it expires, 1 to 10080",
    "PROPOSAL_REMINDER_MINUTES": "minutes before expiry to post a reminder, 0 to turn off",
    "MAX_TOOL_ROUNDS": "tool rounds the model may take in one turn, 1 to 50",
    "TOOL_TIMEOUT_SECONDS": "seconds a tool may run, 1 to 600",
    "PUBLIC_BASE_URL": "the https:// address where this bot's HTTP server is reachable",
    "SWEEP_INTERVAL_SECONDS": "seconds between expiry/recovery sweeps, 1 to 300",
    "SUGGESTED_PROMPTS": 'JSON such as [{"title": "Plan my day", "message": "What is due '
    'today?"}] (at most 4; [] for none)',
    "THREAD_FOLLOWUPS": "on (a thread the bot answered in goes on without a mention) or "
    "mention (it answers there only when mentioned)",
    "REPLY_IN_THREADS": "nothing: it is replaced by THREAD_FOLLOWUPS (on or mention)",
    "RETENTION_DAYS": "days a conversation is kept after its last activity; 0 keeps it forever",
    "AUDIT_CHECKPOINT_EVERY": "how often the audit chain is checkpointed: a duration such as "
    "30s, 15m, 1h or 1d",
    "AUDIT_SIGNING_KEY": "a secret key (any text) that keys the audit rows and signs the "
    "checkpoints",
    "AUDIT_CHECKPOINT_CHANNEL": "the id of the channel the audit checkpoints are posted to",
    "GITHUB_API_URL": "https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise",
    "GITHUB_REPOS": "comma-separated owner/repo or owner/* the assistant may touch, e.g. "
    "acme/api,acme-docs/*",
    "LINEAR_API_URL": "https://api.linear.app/graphql",
    "MCP_SERVERS": 'JSON such as {"mcpServers": {"docs": {"command": "npx", "args": '
    '["-y", "@modelcontextprotocol/server-everything"]}}}, or a path to such a file',
    "MCP_CHECK_SECONDS": "seconds between checks that each MCP server is still up, 1 to 600",
}


class SettingsError(Exception):
    """Settings are missing or invalid; `problems` holds one line per variable."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems

    def render(self) -> str:
        lines = ["Countersign cannot start: its configuration needs attention."]
        lines += [f"  - {p}" for p in self.problems]
        lines.append("Set these as environment variables or in a .env file (see docs/settings.md).")
        return "\n".join(lines)


def describe(error: dict[str, Any]) -> str:
    """One line for one of pydantic's errors: the variable, what is wrong, what to set."""
    loc = error.get("loc") or ()
    name = str(loc[0]).upper() if loc else ""
    message = str(error.get("msg", "is invalid"))
    if message.startswith("Value error, "):
        message = message.removeprefix("Value error, ")
    if not name and ":" in message:  # raised by a model validator, already names itself
        return message
    hint = HINTS.get(name, "a valid value")
    if len(loc) > 1:  # inside a JSON value: say where
        message = f"{'.'.join(str(p) for p in loc[1:])}: {message}"
    elif error.get("type") == "missing":
        return f"{name} is missing: set it to {hint}."
    return f"{name} is invalid ({message}): set it to {hint}."
