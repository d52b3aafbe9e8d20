"""Floating-point datapath pieces: the FP16/BF16 multiplier and the FP32 adder, cut into clock-enabled stages.

The arithmetic is the one of :mod:`trainforge.golden.fp` under the policy of
:mod:`trainforge.spec.fp`; see ``hw/fp/README.md``.
"""
