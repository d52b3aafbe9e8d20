"""``trainforge caterpillar ...``: the command line of the caterpillar family."""
