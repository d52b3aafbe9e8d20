"""``trainforge neurotrainer ...``: the command line of the neurotrainer family."""
