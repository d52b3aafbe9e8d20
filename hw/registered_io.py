"""Register wrapper that isolates a block for place and route."""
from amaranth import Cat, Elaboratable, Module, Signal
from amaranth.hdl import Value
from amaranth.lib import wiring

__all__ = ["RegisteredIO"]


class RegisteredIO(Elaboratable):
    """Puts a flip-flop on every input and output of a component, so that the Fmax found is the block's own.

    A board has far fewer pins than a block has port bits, so the inputs come
    from a scan chain of flip-flops shifted in from one button pin, and the
    registered outputs are XOR-reduced into one registered LED. Every output
    bit therefore reaches a pin and no logic of the block can be optimised
    away, while every timing path through the block starts and ends at a
    flip-flop. Without a platform (for a quick elaboration check) the serial
    input and the LED are plain signals.

    Parameters
    ----------
    component : wiring.Component
        The block to wrap; it runs in the ``sync`` domain.

    Attributes
    ----------
    input_bits, output_bits : int
        Port bits of the block, clock and reset excluded.
    wrapper_flip_flops : int
        Flip-flops the wrapper adds (``input_bits + output_bits + 1``), to
        subtract from the device's count.
    """

    def __init__(self, component):
        self.component = component
        flat = list(component.signature.flatten(component))
        self._inputs = [Value.cast(value) for _, member, value in flat if member.flow == wiring.In]
        self._outputs = [Value.cast(value) for _, member, value in flat if member.flow == wiring.Out]
        self.input_bits = sum(len(value) for value in self._inputs)
        self.output_bits = sum(len(value) for value in self._outputs)
        self.wrapper_flip_flops = self.input_bits + self.output_bits + 1

    def elaborate(self, platform):
        m = Module()
        m.submodules.block = self.component
        if platform is None:
            serial_in, led = Signal(), Signal()
        else:
            serial_in = platform.request("button", 0).i
            led = platform.request("led", 0).o

        scan_chain = Signal(max(self.input_bits, 1))
        m.d.sync += scan_chain.eq(Cat(serial_in, scan_chain[:-1]))
        offset = 0
        for value in self._inputs:
            m.d.comb += value.eq(scan_chain[offset:offset + len(value)])
            offset += len(value)

        captured = Signal(max(self.output_bits, 1))
        m.d.sync += captured.eq(Cat(*self._outputs))
        parity = Signal()
        m.d.sync += parity.eq(captured.xor())
        m.d.comb += led.eq(parity)
        return m
