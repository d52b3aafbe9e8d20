"""NeuroTrainer host-side tools: the ``trainforge neurotrainer`` reports."""
