"""CATERPILLAR system models: the architecture (time, energy, area) and the training-method study."""
