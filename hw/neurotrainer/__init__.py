"""NeuroTrainer family: SR-LO MAC array and comparator unit (NeuroTrainer, Sections 3.3.2 and 3.3.3)."""
