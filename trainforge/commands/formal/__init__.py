"""``trainforge formal``: the formal proofs (:mod:`trainforge.formal`)."""
