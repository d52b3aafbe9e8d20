"""TensorDash transposer between on-chip memory banks and the tile scratchpads (Section III-A)."""
from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec import tensordash as spec

__all__ = ["TDTransposer"]


class TDTransposer(wiring.Component):
    """Reads ``size`` blocks of ``size`` values, then supplies the ``size`` transposed blocks.

    The paper's tensors are stored in groups of 4 x 4 values: four 4-value
    blocks, each consecutive along the channel dimension. The transposer
    copies one group into its internal buffer and then gives out block ``j``
    made of value ``j`` of every block read. It alternates between a fill
    phase (``size`` input transfers) and a drain phase (``size`` output
    transfers).

    Parameters
    ----------
    size : int
        Values per block and blocks per group (4 in the paper).
    width : int
        Bits per value.

    The schema, defaults included, is :data:`trainforge.spec.tensordash.TRANSPOSER_PARAMS`.

    Members
    -------
    i_block : In(stream.Signature(ArrayLayout(unsigned(width), size)))
    o_block : Out(stream.Signature(ArrayLayout(unsigned(width), size)))

    Attributes
    ----------
    block_layout : data.ArrayLayout
    """

    PARAMS = spec.TRANSPOSER_PARAMS

    def __init__(self, **params):
        params = self.PARAMS.apply(self, **params)
        self.block_layout = spec.block_layout(params)
        super().__init__({
            "i_block": In(stream.Signature(self.block_layout)),
            "o_block": Out(stream.Signature(self.block_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        size = self.size
        buffer = [Signal(self.block_layout, name=f"block{k}") for k in range(size)]
        index = Signal(range(size))
        draining = Signal()
        m.d.comb += [
            self.i_block.ready.eq(~draining),
            self.o_block.valid.eq(draining),
        ]
        with m.Switch(index):
            for k in range(size):
                with (m.Case(k) if k < size - 1 else m.Default()):
                    m.d.comb += [self.o_block.payload[i].eq(buffer[i][k]) for i in range(size)]
        for k in range(size):
            with m.If(self.i_block.valid & ~draining & (index == k)):
                m.d.sync += buffer[k].eq(self.i_block.payload)
        with m.If((self.i_block.valid & ~draining) | (self.o_block.ready & draining)):
            m.d.sync += index.eq(index + 1)
            with m.If(index == size - 1):
                m.d.sync += [index.eq(0), draining.eq(~draining)]
        return m
