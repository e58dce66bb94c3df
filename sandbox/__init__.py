"""A local Slack-compatible sandbox: Web API, Socket Mode, interactivity and a web page.

The bot runs unchanged against it (its `SLACK_API_URL` points here); the bot never imports
this package: to the bot it is just another Slack."""
