"""What the RTL asks of synthesis beyond its function: attributes that the FPGA flow honours.

Registers that hold the same value feeding several distant consumers are written as one register
per consumer (a *replica*), so that each can sit beside its consumer: the net that crosses the
chip then ends at a register, not at a multiplier input. Yosys's ``opt_merge`` merges flip-flops
with the same inputs back into one unless they carry ``keep``; Amaranth puts a signal's
attributes on its wire, not on the flip-flop that drives it. So the RTL marks each replica's
signal with :data:`REPLICA`, and :data:`YOSYS_KEEP_REPLICAS` (run by ``trainforge fpga`` right
after reading the design) turns the mark into ``keep`` on the flip-flop cells that drive such
wires. Replicas change no cycle and no value: simulation sees ordinary registers.
"""

__all__ = ["REPLICA", "YOSYS_KEEP_REPLICAS", "replica_attrs"]

#: Wire attribute of a register replica.
REPLICA = "trainforge_replica"

#: Yosys commands: processes to cells, then ``keep`` on the cells driving a :data:`REPLICA` wire.
YOSYS_KEEP_REPLICAS = f"proc; setattr -set keep 1 a:{REPLICA} %ci1 c:* %i"


def replica_attrs():
    """The ``attrs`` of a replica register's :class:`~amaranth.hdl.Signal`."""
    return {REPLICA: 1}
