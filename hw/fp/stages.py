"""Running a datapath written as a list of steps, with clock-enabled registers between chosen steps."""
from amaranth import Signal, Value

__all__ = ["register_values", "run_steps"]


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
        Where the registers go; ``None`` only when ``cuts`` is empty (pure combinational logic).
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
    return values
