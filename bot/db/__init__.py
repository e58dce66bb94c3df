"""Persistence: typed models, engine and session handling, repositories, migrations."""
