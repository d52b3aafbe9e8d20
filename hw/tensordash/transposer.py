"""TensorDash transposer between on-chip memory banks and the tile scratchpads (Section III-A)."""
from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.params import Param, ParamSchema

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

    Members
    -------
    i_block : In(stream.Signature(ArrayLayout(unsigned(width), size)))
    o_block : Out(stream.Signature(ArrayLayout(unsigned(width), size)))

    Attributes
    ----------
    block_layout : data.ArrayLayout
    """

    PARAMS = ParamSchema((
        Param("size", int, 4, "values per block and blocks per group", minimum=2, maximum=8),
        Param("width", int, 16, "bits per value", minimum=1, maximum=64),
    ))

    def __init__(self, *, size=4, width=16):
        self.params = self.PARAMS.resolve(size=size, width=width)
        self.size = size
        self.width = width
        self.block_layout = data.ArrayLayout(width, size)
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
