"""Formal wrapper of any component with ``lib.stream`` ports: outputs keep the stream rules when inputs do."""
from amaranth import Elaboratable, Module, Signal, Value
from amaranth.hdl import Assert, Assume
from amaranth.lib import stream, wiring

__all__ = ["StreamRulesProperties"]


class StreamRulesProperties(Elaboratable):
    """A component between free producers and consumers: every output stream keeps the stream rules.

    Assumed, for every input stream: once ``valid`` is high, ``valid`` and
    ``payload`` hold until ``ready``. Asserted, for every output stream: the
    same. Every other input port of the component is free in every cycle; a
    reset may come at any cycle (the rules start again after it).

    Parameters
    ----------
    component : wiring.Component
        The design under proof; its ``lib.stream`` members (``In`` and ``Out``, not in arrays) are the
        streams checked.

    Attributes
    ----------
    inputs, outputs : list of str
        The names of the input and output streams.
    ports : list of Value
        The free inputs of the wrapper.
    """

    def __init__(self, component):
        self.component = component
        self.inputs, self.outputs = [], []
        self.ports = []
        self._free = {}
        for name, member in component.signature.members.items():
            if member.dimensions:
                raise TypeError(f"member {name!r} is an array: the stream rules wrapper takes single ports only")
            if member.is_signature and isinstance(member.signature, stream.Signature):
                (self.inputs if member.flow == wiring.In else self.outputs).append(name)
            elif member.is_port and member.flow == wiring.In:
                self._free[name] = Signal(member.shape, name=f"free_{name}")
        for name in self.inputs:
            port = getattr(component, name)
            self._free[name] = (Signal(name=f"{name}_valid"),
                                Signal(len(Value.cast(port.payload)), name=f"{name}_payload"))
        for name in self.outputs:
            self._free[name] = Signal(name=f"{name}_ready")
        for value in self._free.values():
            self.ports.extend(value if isinstance(value, tuple) else (value,))

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = component = self.component
        known = Signal()
        m.d.sync += known.eq(1)
        for name, free in self._free.items():
            port = getattr(component, name)
            if name in self.inputs:
                valid, payload = free
                m.d.comb += [port.valid.eq(valid), Value.cast(port.payload).eq(payload)]
                self._rule(m, known, port.valid, port.ready, port.payload, Assume, name)
            elif name in self.outputs:
                m.d.comb += port.ready.eq(free)
                self._rule(m, known, port.valid, port.ready, port.payload, Assert, name)
            else:
                m.d.comb += port.eq(free)
        return m

    @staticmethod
    def _rule(m, known, valid, ready, payload, kind, name):
        """``kind`` (Assume or Assert) that a valid not taken last cycle holds, with its payload, this cycle."""
        held_valid = Signal(name=f"{name}_was_stalled")
        payload = Value.cast(payload).as_unsigned()  # compared as bits (a signed payload would not equal its copy)
        held_payload = Signal(len(payload), name=f"{name}_past_payload", reset_less=True)
        m.d.sync += [held_valid.eq(valid & ~ready), held_payload.eq(payload)]
        with m.If(known & held_valid):
            m.d.comb += kind(valid & (payload == held_payload),
                             f"{name}: valid or payload changed before ready")
        return m
