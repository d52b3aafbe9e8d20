"""Benchmarks of elaboration and Verilog emission (see ``trainforge bench``)."""


def _emit(block_name, **params):
    from trainforge.emit import emit

    return lambda: emit(block_name, **params)


BENCHMARKS = {
    "verilog_dense_pe_default": (_emit("dense_pe"), {"block": "dense_pe", "params": "defaults"}),
    "verilog_dense_pe_64_lanes": (_emit("dense_pe", lanes=64, width=32, acc_width=64),
                                  {"block": "dense_pe", "params": {"lanes": 64, "width": 32, "acc_width": 64}}),
}
