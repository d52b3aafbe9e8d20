"""The NeuroTrainer family's registered blocks."""
from ..registry import Block, MutationProof, MutationSubset
from .comparator import NTComparator
from .lut import NTLUT
from .mac import NTMAC
from .pmag import NTPMAG
from .pe import NTPE
from .vault import NTVault
from .bus import NTBus
from .integration import NTSystem
from .sequencer import NTSequencer

BLOCKS = (
    Block(
        name="nt_sequencer",
        component=NTSequencer,
        testbench="tb_nt_sequencer",
        summary="NeuroTrainer iBuffer and layer sequencer: a program queue per PMAG and PE and a layer table, "
                "layers run one after the other without the host (Sec. 4, Fig. 12)",
        test_params=({"queue_depth": 16, "max_layers": 4},),
        regress_params=({"pes": 4, "queue_depth": 4, "max_layers": 2}, {"pes": 3, "queue_depth": 128,
                                                                        "max_layers": 16}),
    ),
    Block(
        name="nt_bus",
        component=NTBus,
        testbench="tb_nt_bus",
        summary="NeuroTrainer bus: broadcast (common vault to PEs) over merge (PEs to common vault, fixed priority), "
                "REQ-ACK-SEND, 4-stage pipeline (Sec. 3.4)",
        test_params=({"pes": 3, "width": 16},),
        regress_params=({"pes": 2, "width": 32}, {"pes": 16, "width": 32}),
    ),
    Block(
        name="nt_system",
        component=NTSystem,
        testbench="tb_nt_system",
        summary="NeuroTrainer integration: common vault + per-PE vaults with PMAGs, bus, PEs running compiled conv/FC FF, BP, UP and max-pooling programs",
        test_params=({},),
        # The whole testbench took 107 s on Icarus (build included, load average 9; scenario_table 40 s, model_cycles
        # 17 s). The subset (36 s with its build on the RTL of 889f917, load average 5): the vaults' and the PE buffers'
        # power-on reads (first: they keep their words across resets), merged result blocks, the hand-written PMAG
        # programs, a layer whose config sends the END-MARK a row early (its data written where a data request meets
        # it), a reset mid-layer, SR-LO layers back to back, the sequencer's programs (a hand-written one among
        # them, whose write programs queue up to the write queues' skid registers), an MLP SGD step (FF, BP, UP) and
        # the sequenced CNN step (conv, pooling, FC).
        mutation_subset=MutationSubset(tests=("power_on_vaults_read_zero", "power_on_pe_buffers_read_zero",
                                              "merged_scenarios", "handwritten_programs", "end_mark_early",
                                              "reset_mid_layer",
                                              "stochastic_rounding_state_carried", "sequenced_program", "sgd_step_mlp",
                                              "sequenced_sgd_step_cnn")),
        # make mutate's survivor 6 of the RTL of nt_system.v 70746f9e...: the word-LUT pipeline never fills the
        # breakpoint stage's skid register, whose payload bit 65 the mutant loads with 0.
        mutation_proofs=(
            MutationProof(block="nt_system", mutant=6, kind="script",
                          script="neurotrainer/proofs/nt_system_mutant_6.ys",
                          mutant_sha256="a701e42fc1dbf9e3758ab2ceabb8d28fa358eeec7c84a749518728f1899a61ec",
                          why="vault_1.lut's breakpoint and product stages move on one enable, so neither fills its "
                              "skid register (skid_valid 0 proven inductive) and the skid payload is never read"),
            MutationProof(block="nt_system", mutant=8, kind="script",
                          script="neurotrainer/proofs/nt_system_mutant_8.ys",
                          mutant_sha256="e8e86fd145781fed7ba06a8c92a50bb00f4976f9314f5f9841125b1780d6bd7b",
                          why="the credit-gated broadcast keeps room in PE 0's FIFO for every word on the bus "
                              "(credits + FIFO level + words in flight = 8 proven inductive), so "
                              "bus.broadcast_stage_0's skid register never fills and the mutated branch is never "
                              "taken"),
            MutationProof(block="nt_system", mutant=7, kind="script",
                          script="neurotrainer/proofs/nt_system_mutant_7.ys",
                          mutant_sha256="4001c053182ee142cb14a3699b3bff51f92e2f054845431407229949a2df612c",
                          why="bit 30 of the common vault's write PMAG R5 address reaches only address bits 30-31, "
                              "which nothing reads (its forward cone is empty in the gate-level original); the "
                              "mutant differs from the original in that bit's next value only"),
        ),
        regress_params=(
            {"pes": 3, "lanes": 1, "vault_latency": 9, "vault_interval": 2, "broadcast_credits": 2},
            {"pes": 4, "lanes": 3, "pe_vault_depth": 512, "vault_latency": 1, "broadcast_credits": 3, "frac_bits": 12,
             "seed": 77},
        ),
    ),
    Block(
        name="nt_vault",
        component=NTVault,
        testbench="tb_nt_vault",
        summary="NeuroTrainer vault memory model for simulation: configurable read latency and bandwidth (no DRAM timing)",
        test_params=({"depth": 64, "latency": 3, "interval": 2},),
        regress_params=({"depth": 2, "latency": 1, "interval": 1}, {"depth": 1024, "latency": 20, "interval": 5}),
    ),
    Block(
        name="nt_pe",
        component=NTPE,
        testbench="tb_nt_pe",
        summary="NeuroTrainer PE: k SR-LO MACs + k comparators, 3 double-buffered local buffers with CNT2/CNT1, 4-byte programs (Sec. 3.3, Fig. 9, Table 4)",
        test_params=({"lanes": 2, "in1_depth": 64, "in2_depth": 32, "out_depth": 16, "index_bits": 4},),
        regress_params=(
            {"lanes": 3, "in1_depth": 128, "in2_depth": 16, "out_depth": 4, "frac_bits": 30, "frac_bits16": 14,
             "rounding": "sr_full", "seed": 777},
            {"lanes": 1, "in1_depth": 16, "in2_depth": 8, "out_depth": 2, "frac_bits": 0, "frac_bits16": 0,
             "rounding": "truncate", "index_bits": 16},
            {"lanes": 8, "rounding": "nearest"},
        ),
        # trainforge mutate --subset: the table and a short random regression (a survivor runs everything).
        mutation_subset=MutationSubset(tests=("scenario_table", "random_regression"), transactions=300),
        # make mutate's survivors 11 (a script) and 18 (the MAC alone, bit 4 of product16_0_1 relaxed; its equiv_*
        # script, neurotrainer/proofs/nt_pe_mutant_18.ys, ran out of 1200 s and is not declared).
        mutation_proofs=(
            MutationProof(block="nt_pe", mutant=11, kind="script", script="neurotrainer/proofs/nt_pe_mutant_11.ys",
                          mutant_sha256="561f3829e7ccb4f3afa6a06c79e261246d91bfe1ce691449147d2461840ac19a",
                          why="the address mux's A input (6'hxx) is the address only when the write enable is 0"),
            MutationProof(block="nt_pe", mutant=18, kind="miter", top="nt_pe.mac", relax="product16_0_1",
                          cases=({},), bits=(4,),
                          mutant_sha256="bd6759ddbefee05a9816ef58f711eed722c7f399d8cad332eee698cdf3fb7365",
                          why="bits 7..0 of product16_0_1 are read only by its own hold mux (the 16-bit path "
                              "keeps bits 33..8): bit 4 may differ in every state, no other bit or output follows"),
        ),
    ),
    Block(
        name="nt_mac",
        component=NTMAC,
        testbench="tb_nt_mac",
        summary="NeuroTrainer Fixed 32/16 MAC array with SR-LO / per-MAC SR / truncate / nearest rounding (Fig. 11, Table 1)",
        test_params=(
            {},
            {"lanes": 3, "frac_bits": 30, "frac_bits16": 14, "rounding": "sr_full", "seed": 12345},
        ),
        regress_params=(
            {"lanes": 2, "frac_bits": 0, "frac_bits16": 0, "rounding": "truncate"},
            {"lanes": 8, "frac_bits": 12, "frac_bits16": 4, "rounding": "nearest"},
            {"lanes": 32, "frac_bits": 1, "frac_bits16": 1, "rounding": "sr_lo", "seed": 1},
        ),
    ),
    Block(
        name="nt_comparator",
        component=NTComparator,
        testbench="tb_nt_comparator",
        summary="NeuroTrainer comparator unit: k 16-bit y = max(x, y) with argmax, for max pooling (Sec. 3.3.3)",
        test_params=({"lanes": 3, "index_bits": 4},),
        regress_params=({"lanes": 32, "index_bits": 16}, {"lanes": 1, "index_bits": 1}),
    ),
    Block(
        name="nt_pmag",
        component=NTPMAG,
        testbench="tb_nt_pmag",
        summary="NeuroTrainer PMAG: 7 nested counters, decoders, base + strides address function, END-MARK request stream (Fig. 4, Tables 2-3)",
        test_params=({"counter_bits": 16},),
        regress_params=({"counter_bits": 3},),
        # make mutate's survivor 16 (2026-11-29, the RTL after the shared per-level selection): the hold of k's
        # level-3 register in the setup cycles before setup == 1 loads every level's start value.
        mutation_proofs=(
            MutationProof(block="nt_pmag", mutant=16, kind="miter", relax="k_r3",
                          cases=tuple({"setup": value} for value in range(1, 8)), bits=(12,),
                          mutant_sha256="2555d1c5836ea58ed656f5445e951eb92b5beca263fe042d74f808bd68d8efd9",
                          why="bit 12 of k_r3 changes only while setup counts down to 1, and setup == 1 loads "
                              "k's start value into k_r3; nothing reads k_r3 before the walk (setup == 0)"),
        ),
    ),
    Block(
        name="nt_lut",
        component=NTLUT,
        testbench="tb_nt_lut",
        summary="NeuroTrainer LUT unit: f(x) or f'(x) (ReLU, tanh, sigmoid, exp, log) by table + linear interpolation (Sec. 3.2)",
        test_params=({"function": "sigmoid_grad", "table_bits": 5, "frac_bits": 11, "out_frac_bits": 14},),
        regress_params=(
            {"function": "tanh"},
            {"function": "exp", "table_bits": 10},
            {"function": "log", "table_bits": 1, "frac_bits": 0, "out_frac_bits": 0},
            {"function": "relu_grad", "table_bits": 12, "frac_bits": 15, "out_frac_bits": 15},
        ),
    ),
)
