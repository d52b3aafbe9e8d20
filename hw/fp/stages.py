"""Running a datapath written as a list of steps, with clock-enabled registers between chosen steps."""
from amaranth import Signal, Value

__all__ = ["register_values", "name_values", "run_steps"]


def name_values(m, values, name):
    """Drive one named combinational signal from each value of ``values`` in ``m``; the signals by the same keys.

    Naming a step's results keeps each one a single net that later steps
    share (an expression tree would be repeated at every use by the
    simulators and the RTLIL export).
    """
    signals = {}
    for key, value in values.items():
        value = Value.cast(value)
        signal = Signal(value.shape(), name=f"{name}_{key}")
        m.d.comb += signal.eq(value)
        signals[key] = signal
    return signals


def register_values(m, values, enable, name):
    """Register every value of ``values`` in ``m`` (loaded while ``enable`` is high); the registers by the same keys.

    Parameters
    ----------
    m : Module
        The module the registers go into (``sync`` domain).
    values : dict of str to Value-castable
        What to register; each register takes its value's shape.
    enable : Value
        Clock enable of the registers.
    name : str
        Prefix of the register names.
    """
    registers = {}
    with m.If(enable):
        for key, value in values.items():
            value = Value.cast(value)
            register = Signal(value.shape(), name=f"{name}_{key}")
            m.d.sync += register.eq(value)
            registers[key] = register
    return registers


def run_steps(m, steps, values, cuts, enable, name):
    """Apply ``steps`` to ``values`` in order, registering the values after the steps whose index is in ``cuts``.

    Parameters
    ----------
    m : Module or None
        Where the registers and the named results of the uncut steps go;
        ``None`` only when ``cuts`` is empty (then the result is one expression
        tree: fine for a small datapath, very large for the FP32 adder).
    steps : sequence of callable
        Each takes the dict of named values and returns the next dict.
    values : dict of str to Value-castable
        The inputs of the first step.
    cuts : collection of int
        Indices of the steps followed by a register stage.
    enable : Value
        Clock enable of every register stage.
    name : str
        Prefix of the register names (``{name}_s{index}_{key}``).

    Returns
    -------
    dict
        The values after the last step (registers if the last index is in ``cuts``).
    """
    for index, step in enumerate(steps):
        values = step(values)
        if index in cuts:
            values = register_values(m, values, enable, f"{name}_s{index}")
        elif m is not None:
            values = name_values(m, values, f"{name}_s{index}")
    return values
