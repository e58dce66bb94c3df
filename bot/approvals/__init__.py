"""Action proposals: the state machine, the service that moves proposals through it, and the
executor that runs an approved call exactly once."""
