"""A multiplier with registered operands and a registered product: on the ECP5, one MULT18X18D with its own registers."""
from amaranth import ClockSignal, Const, Instance, Module, ResetSignal, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .synthesis import replica_attrs

__all__ = ["RegisteredMultiplier"]

#: Operand width of the ECP5's MULT18X18D.
DSP_OPERAND_BITS = 18


class RegisteredMultiplier(wiring.Component):
    """``product = a * b`` two enabled cycles after ``a`` and ``b``: operand registers, then the product register.

    In every cycle with ``enable`` high the operand registers take ``a`` and ``b`` and the
    product register takes the product of the operand registers; with ``enable`` low all three
    hold. A reset clears the product register (the operand registers have no reset).

    Elaborated for a Lattice ECP5 platform with operands of at most 18 bits, the three registers
    are the MULT18X18D's own input and output registers (``REG_INPUTA``, ``REG_INPUTB``,
    ``REG_OUTPUT`` on ``CLK0``, clock enable ``CE0``, synchronous reset ``RST0`` on the output
    only): no fabric flip-flop sits on either side of the multiplier, so its routing from and to
    the fabric has a whole cycle, wherever the placer puts the DSP block. Elsewhere (simulation,
    generic synthesis) the registers are flip-flops around an Amaranth ``*``, each operand register
    marked as a replica (:mod:`trainforge.hw.synthesis`): several multipliers may take the same
    operand. Both forms have the same cycles and values; only the generic one is simulated (Yosys
    has no simulation model of the MULT18X18D).

    Parameters
    ----------
    a_shape, b_shape : ShapeLike
        Operand shapes, signed or unsigned; the product's shape is that of ``a * b``.

    Members
    -------
    a : In(a_shape)
    b : In(b_shape)
    enable : In(1)
    product : Out(product_shape)
        The registered product.
    """

    def __init__(self, a_shape, b_shape):
        self.a_shape, self.b_shape = Shape.cast(a_shape), Shape.cast(b_shape)
        self.product_shape = (Signal(self.a_shape) * Signal(self.b_shape)).shape()
        super().__init__({
            "a": In(self.a_shape),
            "b": In(self.b_shape),
            "enable": In(1),
            "product": Out(self.product_shape),
        })

    def fits_dsp(self):
        """Whether both operands, sign- or zero-extended, fit the MULT18X18D's 18 bits."""
        return self.a_shape.width <= DSP_OPERAND_BITS and self.b_shape.width <= DSP_OPERAND_BITS \
            and self.product_shape.width <= 2 * DSP_OPERAND_BITS

    def elaborate(self, platform):
        m = Module()
        if getattr(platform, "family", None) == "ecp5" and self.fits_dsp():
            self._elaborate_ecp5(m)
            return m
        a = Signal(self.a_shape, name="a_registered", reset_less=True, attrs=replica_attrs())
        b = Signal(self.b_shape, name="b_registered", reset_less=True, attrs=replica_attrs())
        with m.If(self.enable):
            m.d.sync += [a.eq(self.a), b.eq(self.b), self.product.eq(a * b)]
        return m

    def _elaborate_ecp5(self, m):
        bits = DSP_OPERAND_BITS
        a = Signal(bits, name="a_extended")
        b = Signal(bits, name="b_extended")
        p = Signal(2 * bits, name="p")
        m.d.comb += [a.eq(self.a.as_signed() if self.a_shape.signed else self.a),
                     b.eq(self.b.as_signed() if self.b_shape.signed else self.b),
                     self.product.eq(p[:self.product_shape.width])]
        registered = {f"p_{name}": value for register in ("INPUTA", "INPUTB", "OUTPUT")
                      for name, value in ((f"REG_{register}_CLK", "CLK0"), (f"REG_{register}_CE", "CE0"),
                                          (f"REG_{register}_RST", "RST0" if register == "OUTPUT" else "RST1"))}
        ports = {f"i_A{k}": a[k] for k in range(bits)}
        ports.update({f"i_B{k}": b[k] for k in range(bits)})
        ports.update({f"i_C{k}": Const(0) for k in range(bits)})
        ports.update({f"o_P{k}": p[k] for k in range(2 * bits)})
        m.submodules.dsp = Instance(
            "MULT18X18D",
            **registered,
            p_REG_PIPELINE_CLK="NONE", p_GSR="DISABLED", p_RESETMODE="SYNC",
            i_SIGNEDA=Const(int(self.a_shape.signed)), i_SIGNEDB=Const(int(self.b_shape.signed)),
            i_SOURCEA=Const(0), i_SOURCEB=Const(0),
            i_CLK0=ClockSignal(), i_CLK1=Const(0), i_CLK2=Const(0), i_CLK3=Const(0),
            i_CE0=self.enable, i_CE1=Const(0), i_CE2=Const(0), i_CE3=Const(0),
            i_RST0=ResetSignal(allow_reset_less=True), i_RST1=Const(0), i_RST2=Const(0), i_RST3=Const(0),
            **ports,
        )
