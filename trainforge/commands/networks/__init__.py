"""``trainforge networks ...``: the built-in networks of every model, in the one network format."""
