"""Tools the model may call: typed declarations, grouped in packs."""
