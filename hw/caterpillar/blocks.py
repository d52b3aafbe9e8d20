"""Registered blocks of the CATERPILLAR family."""
from ..registry import Block, MutationProof
from .core import CPCore
from .pe import CPPE
from .reciprocal import CPReciprocal
from .ring import CPRing

BLOCKS = (
    Block(
        name="cp_pe",
        component=CPPE,
        testbench="tb_cp_pe",
        summary="CATERPILLAR LAC PE: swappable MAC unit, local SRAM, accumulator and reduction register",
        # fp16 with the interleaved accumulator and reduction of 4 partials each (the pipelined accumulation
        # and reduction) in make test; 1 (the one-cycle accumulate and reduction, which cp_core's fp16 set in
        # make test also runs), the accumulator of 4 with the one-cycle reduction, 2 and 8 partials, and the
        # one-cycle accumulate with the interleaved reduction in make regress.
        test_params=({"sram_depth": 32},
                     {"sram_depth": 32, "mac": "fp16", "partial_sums": 4, "reduction_partials": 4}),
        regress_params=({"width": 8, "acc_width": 16, "sram_depth": 8192}, {"mac": "fp16"},
                        {"sram_depth": 32, "mac": "fp16"},
                        {"sram_depth": 32, "mac": "fp16", "partial_sums": 4},
                        {"sram_depth": 32, "mac": "fp16", "partial_sums": 2},
                        {"sram_depth": 32, "mac": "fp16", "reduction_partials": 2},
                        {"mac": "fp16", "partial_sums": 8, "reduction_partials": 8}),
    ),
    Block(
        name="cp_core",
        component=CPCore,
        testbench="tb_cp_core",
        summary="CATERPILLAR LAC core: n_r x n_r PEs, row/column buses, GEMV fwd/bwd, GEMM, microcoded sequencer",
        # make test: a local memory of 48 words (not a power of two: the base field can exceed it, so the
        # base check runs) and a tree of 3 PEs (not a power of two: a PE without a partner at distance 2).
        test_params=(
            {"n_r": 2, "sram_depth": 48, "max_blocks": 8},
            {"n_r": 3, "sram_depth": 64, "max_blocks": 8, "reduction": "tree"},
            # the half-precision FPU with the pipelined FP32 accumulation and bus reduction (4 partials each):
            # the interleaved orders, every event after the accumulate stage later, the GEMV outputs later
            {"n_r": 2, "sram_depth": 48, "max_blocks": 8, "mac": "fp16", "partial_sums": 4,
             "reduction_partials": 4},
        ),
        # make regress: the shipped default (n_r 4, 8192 words, max_blocks 64) and n_r 16 too.
        regress_params=(
            {},
            {"n_r": 16, "sram_depth": 64, "max_blocks": 4, "reduction": "tree"},
            {"n_r": 4, "sram_depth": 64, "max_blocks": 8, "reduction": "tree"},
            {"n_r": 4, "sram_depth": 64, "max_blocks": 8},
            {"n_r": 2, "sram_depth": 64, "max_blocks": 8, "reduction": "tree", "width": 8, "acc_width": 20},
            {"n_r": 3, "sram_depth": 128, "max_blocks": 8, "reduction": "tree"},
            {"n_r": 8, "sram_depth": 64, "max_blocks": 4},
            # fp16: a tree that is not a power of two, and a 4 x 4 core with the bus
            {"n_r": 3, "sram_depth": 64, "max_blocks": 8, "reduction": "tree", "mac": "fp16"},
            {"n_r": 4, "sram_depth": 64, "max_blocks": 8, "mac": "fp16"},
            # fp16 with the one-cycle FP32 adds at n_r 2 (in make test until the pipelined set replaced it)
            {"n_r": 2, "sram_depth": 48, "max_blocks": 8, "mac": "fp16"},
            # fp16 pipelined: a 4 x 4 core (the interleaved bus reduction's order is seen only beyond 2 terms),
            # and the tree with the interleaved accumulator (the tree keeps the one-cycle reduction add)
            {"n_r": 4, "sram_depth": 64, "max_blocks": 8, "mac": "fp16", "partial_sums": 4, "reduction_partials": 4},
            {"n_r": 3, "sram_depth": 64, "max_blocks": 8, "reduction": "tree", "mac": "fp16", "partial_sums": 4},
            # fp16 with 8 partials each: the accumulator and reduction adders with one step per stage (the
            # registered addend, 7 adder stages; 30 and 31 cycles), the setting measured for Fmax
            {"n_r": 2, "sram_depth": 48, "max_blocks": 8, "mac": "fp16", "partial_sums": 8,
             "reduction_partials": 8},
        ),
        # tb_cp_core's EventMonitor reads these enables by name (trainforge mutate keeps them through opt_clean).
        probed_wires=("pe_*_enable", "write_back", "vector_*_enable", "error_*_enable"),
        # (The declared proof of the old list's mutant 13 was removed: today's mutant 13 is another mutation, which
        # the testbench kills; README.md.)
        mutation_proofs=(
            MutationProof(block="cp_core", mutant=1, kind="script", script="caterpillar/proofs/cp_core_mutant_1.ys",
                          mutant_sha256="d8c19276f95814a25d7ddf230a1e0c4af342fc192ee3877ed1e494db7941a1e4",
                          why="block_b steps only below block_b_last <= max_blocks - 1 = 7 (1-inductive), so bit 3 of "
                              "its next value is 0 already while busy"),
        ),
    ),
    Block(
        name="cp_reciprocal",
        component=CPReciprocal,
        testbench="tb_cp_reciprocal",
        summary="CATERPILLAR Goldschmidt reciprocal: lookup table + iterations on the PE's MAC unit",
        test_params=({}, {"width": 32, "mac": "fp16"}),
        # The 12-bit set moved here from test_params to keep make test under 5 minutes (2026-11-29).
        regress_params=({"width": 12, "frac": 8, "table_bits": 2, "iterations": 1},
                        {"width": 40, "frac": 24, "table_bits": 6, "iterations": 3},
                        {"width": 16, "frac": 16, "table_bits": 4, "iterations": 0},
                        {"width": 32, "mac": "fp16", "table_bits": 5, "iterations": 1},
                        {"width": 32, "mac": "fp16", "table_bits": 1, "iterations": 3}),
        mutation_proofs=(
            MutationProof(block="cp_reciprocal", mutant=2, kind="miter", relax="q",
                          cases=({"busy": 0}, {"step": 0}),
                          mutant_sha256="bea8367a19102d376ef0c5ce6e5270fa6e2fa102080d4e1bd6f583b1704bc6af",
                          why="q's reset value: step 0 (Q = d N) writes q before any step reads it"),
            MutationProof(block="cp_reciprocal", mutant=7, kind="miter",
                          mutant_sha256="124695ba15d3faa3b84f996579a6e90472593d5c4f47007cdf3e388ddeb5b8a3",
                          why="32 added to a length whose only reader is the 5-bit left = (frac - length) mod 32"),
            MutationProof(block="cp_reciprocal", mutant=12, kind="miter",
                          mutant_sha256="4045767249784a75cfb89a4683aae18f1488a97b7ca0f8f7ef67083db7a97971",
                          why="8 added to lengths whose only reader is length > frac: no length crosses 16 but 16, "
                              "where right = length - frac is 0 either way"),
        ),
    ),
    Block(
        name="cp_ring",
        component=CPRing,
        testbench="tb_cp_ring",
        summary="CATERPILLAR ring of cp_cores: all-gather, reduce-scatter, GEMV of Fig. 4 on all cores, systolic hops",
        # make test: 3 PEs per line (a tree that is not a power of two) and 24 words (base can be out of range);
        # a ring of 4 cores (the GEMV's chain of adds over more than two cores).
        test_params=(
            {"cores": 3, "n_r": 3, "sram_depth": 24, "max_blocks": 4, "reduction": "tree"},
            {"cores": 2, "n_r": 4, "sram_depth": 16, "max_blocks": 3},
            {"cores": 4, "n_r": 2, "sram_depth": 32, "max_blocks": 4},
        ),
        # make regress: 8 cores (the largest ring), with the bus and the tree reduction.
        # The fp16 ring (the FP32 collectives and the GEMV's chain of FP32 adds over 3 cores) is here, not in
        # make test: its table took 11 min on Icarus and 37 min on Verilator on the loaded machine.
        regress_params=(
            {"cores": 3, "n_r": 2, "sram_depth": 16, "max_blocks": 3, "mac": "fp16"},
            {"cores": 8, "n_r": 2, "sram_depth": 32, "max_blocks": 4},
            {"cores": 8, "n_r": 3, "sram_depth": 24, "max_blocks": 3, "reduction": "tree"},
            {"cores": 3, "n_r": 4, "sram_depth": 16, "max_blocks": 3, "reduction": "tree"},
            {"cores": 2, "n_r": 4, "sram_depth": 64, "max_blocks": 8, "width": 8, "acc_width": 20},
            {"cores": 2, "n_r": 3, "sram_depth": 24, "max_blocks": 3, "reduction": "tree", "mac": "fp16"},
        ),
        # make mutate's survivors 6, 7 and 8 of the RTL of cp_ring.v 30703262... (the list after the per-PE read-enable
        # registers): the UPDATE write-back datapath of a core, which the ring never selects.
        mutation_proofs=tuple(
            MutationProof(block="cp_ring", mutant=mutant, kind="script",
                          script="caterpillar/proofs/cp_ring_update_datapath_unread.ys",
                          script_values=(("CORE", core),), mutant_sha256=sha256,
                          why="the ring sends its cores GEMV and LOAD commands only (no core's op register ever holds "
                              "UPDATE, proven inductive), so the write-back flag that selects the update datapath is "
                              "0 and the datapath is unread")
            for mutant, core, sha256 in (
                (6, "core_0", "4f5fb7d9bcb3f38d8e1351fe1ad8476cb3c5e7f1dd1c0fa9f70b16c6cc80cfa0"),
                (7, "core_0", "e00bb1d752da67f89e817e1458753c3a781ac686008a97f6eda5fb5d0a865e83"),
                (8, "core_2", "f5ffabd9388ba4f2ab92e466f2316e03ac04042de329cc20a2b519efbf3add10"))),
    ),
)
