"""``trainforge tensordash ...``: the command line of the tensordash family."""
