"""Countersign: a human-in-the-loop AI assistant for Slack."""

__version__ = "0.1.0"
