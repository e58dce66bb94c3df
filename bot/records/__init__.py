"""What people may look back at: their conversations, messages and actions (read models), and
how long any of it is kept."""
