"""A no-combinational-ready-path check for blocks with stream arrays (NeuroTrainer's bus and system).

:func:`streams.check_no_ready_path` looks at ports named ``<member>__ready``; a
``.array(n)`` member's ports are ``<member>__<i>__ready``, which it does not see. This one
takes the stream port names to drive.
"""
from cocotb.triggers import RisingEdge, Timer


def stream_ports(dut, member, count):
    """The port names of a stream array member: ``<member>__0`` .. ``<member>__<count - 1>``."""
    return [f"{member}__{index}" for index in range(count) if hasattr(dut, f"{member}__{index}__ready")]


async def check_no_ready_path_on_ports(bench, inputs, outputs, cycles=60, valid_probability=0.8,
                                       ready_period=7, before_each_cycle=None):
    """Fail if any input stream's ``ready`` changes within a cycle when an output stream's ``ready`` does.

    Every input offers random payloads with random ``valid``; every output is ready one cycle
    in ``ready_period``, so that the outputs fill up. In each cycle every output's ``ready`` is
    toggled 1, 0, 1, 100 ps apart (all toggles fall inside one clock period), and every input's
    ``ready`` must keep the value it had after the clock edge. ``before_each_cycle(cycle)``
    may drive the block's other inputs. The inputs are idle again afterwards.

    Parameters
    ----------
    bench : tbutil.Bench
    inputs, outputs : list of str
        Stream port names (``i_host__0``, ``o_merge``, ...).
    """
    dut = bench.dut
    probability = valid_probability if isinstance(valid_probability, dict) else \
        {name: valid_probability for name in inputs}
    width = {name: len(getattr(dut, f"{name}__payload")) for name in inputs}
    for cycle in range(cycles):
        if before_each_cycle is not None:
            before_each_cycle(cycle)
        for name in inputs:
            getattr(dut, f"{name}__valid").value = int(bench.rng.random() < probability[name])
            getattr(dut, f"{name}__payload").value = bench.rng.getrandbits(width[name])
        for name in outputs:
            getattr(dut, f"{name}__ready").value = int(cycle % ready_period == ready_period - 1)
        await RisingEdge(dut.clk)
        await Timer(1, units="ns")
        held = {name: int(getattr(dut, f"{name}__ready").value) for name in inputs}
        for output in outputs:
            for level in (1, 0, 1):
                getattr(dut, f"{output}__ready").value = level
                await Timer(100, units="ps")
                now = {name: int(getattr(dut, f"{name}__ready").value) for name in inputs}
                assert now == held, (f"input ready {held} -> {now} within a cycle when {output}.ready went to "
                                     f"{level}: a combinational path from an output's ready {bench.where()}")
    for name in inputs:
        getattr(dut, f"{name}__valid").value = 0
