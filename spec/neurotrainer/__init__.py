"""What NeuroTrainer's generators (``hw/neurotrainer``) and golden models (``golden/neurotrainer``) share.

One module per block: parameter schemas, latencies, constants and the rules the
hardware computes at elaboration (reset states, tables) that the golden models reproduce.
"""
