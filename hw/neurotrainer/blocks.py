"""The NeuroTrainer family's registered blocks."""
from ..registry import Block
from ...golden.neurotrainer import comparator as comparator_golden
from ...golden.neurotrainer import lut as lut_golden
from ...golden.neurotrainer import mac as mac_golden
from ...golden.neurotrainer import pmag as pmag_golden
from .comparator import NTComparator
from .lut import NTLut
from .mac import NTMac
from .pmag import NTPmag

BLOCKS = (
    Block(
        name="nt_mac",
        component=NTMac,
        golden=mac_golden.nt_mac,
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
        golden=comparator_golden.nt_comparator,
        testbench="tb_nt_comparator",
        summary="NeuroTrainer comparator unit: k 16-bit y = max(x, y) with argmax, for max pooling (Sec. 3.3.3)",
        test_params=({"lanes": 3, "index_bits": 4},),
        regress_params=({"lanes": 32, "index_bits": 16}, {"lanes": 1, "index_bits": 1}),
    ),
    Block(
        name="nt_pmag",
        component=NTPmag,
        golden=pmag_golden.nt_pmag,
        testbench="tb_nt_pmag",
        summary="NeuroTrainer PMAG: 7 nested counters, decoders, base + strides address function, END-MARK request stream (Fig. 4, Tables 2-3)",
        test_params=({"counter_bits": 16},),
        regress_params=({"counter_bits": 3},),
    ),
    Block(
        name="nt_lut",
        component=NTLut,
        golden=lut_golden.nt_lut,
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
