"""Spend governed like a write (DESIGN.md promise 10): budgets from the policy file, prices per
model, a reservation before each model call and its settlement to the usage the server
reported. A lower layer: it never imports the Slack surface or the conversation."""
