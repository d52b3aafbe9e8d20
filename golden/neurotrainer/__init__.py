"""Golden models of the NeuroTrainer family (vectorised numpy, bit-exact)."""
