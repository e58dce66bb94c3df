"""Example tool packs (see docs/tools.md: "Add your own tools")."""
