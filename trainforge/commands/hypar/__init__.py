"""``trainforge hypar ...``: the command line of the hypar family."""
