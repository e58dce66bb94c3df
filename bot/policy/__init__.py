"""The policy file: ordered rules with CEL conditions that decide every write call first
(allow, deny with a reason for the model, or ask for approval on a card)."""
