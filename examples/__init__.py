"""Example tool packs (see README.md: "Add your own tools")."""
