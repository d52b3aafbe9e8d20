"""Scenario table of ``cp_ring``: ring-buffer programs of WRITE, READ, ALL_GATHER and REDUCE_SCATTER commands.

A scenario's stimulus is a program (command words on ``i_cmd``, their words on
``i_data``); the expected ``o_data`` words are what its READ commands return.

Reference (independent of the golden model): the ring buffers as Python lists,
the collectives stepped hop by hop as the command descriptions say, sums
wrapped to ``acc_width`` bits:

- WRITE / READ (``words``): ``words`` buffer words per core, core 0 first;
- ALL_GATHER (``cw``): at step ``s`` (``0 .. P - 2``) core ``k`` sends its chunk ``(k - s) % P`` and
  core ``k + 1`` overwrites its copy of that chunk;
- REDUCE_SCATTER (``cw``): at step ``s`` core ``k`` sends its chunk ``(k - s - 1) % P`` and core
  ``k + 1`` adds it to its own copy of that chunk (both read before the step's writes).
"""
import numpy as np

from trainforge.golden.caterpillar import ring as golden_ring
from trainforge.spec.caterpillar import COMMAND_LATENCY, RingOp

from scenario import Scenario, Transactions, random_pattern, rng_for


def _signed(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _command(op, words):
    return {"op": int(op), "core": 0, "overlap": 0, "mb": 1, "nb": 1, "base": 0, "words": words}


class _Program:
    def __init__(self, params):
        self.cores, self.n_r, self.acc_width = params["cores"], params["n_r"], params["acc_width"]
        depth = params["cores"] * params["max_blocks"]
        self.buffers = [[[0] * self.n_r for _ in range(depth)] for _ in range(self.cores)]
        self.commands, self.inputs, self.outputs = [], [], []

    def write(self, words):
        """``words[k]``: the words of core ``k``, at buffer word 0."""
        self.commands.append(_command(RingOp.WRITE, len(words[0])))
        for core, core_words in enumerate(words):
            self.inputs += [list(word) for word in core_words]
            self.buffers[core][:len(core_words)] = [list(word) for word in core_words]

    def read(self, count):
        self.commands.append(_command(RingOp.READ, count))
        for core in range(self.cores):
            self.outputs += [list(word) for word in self.buffers[core][:count]]

    def _step_chunks(self, cw, offset, combine):
        cores = self.cores
        for step in range(cores - 1):
            sent = {}
            for core in range(cores):
                chunk = (core - step - offset) % cores
                sent[(core + 1) % cores] = (chunk, [list(word) for word in
                                                    self.buffers[core][chunk * cw:(chunk + 1) * cw]])
            for receiver, (chunk, words) in sent.items():
                own = self.buffers[receiver][chunk * cw:(chunk + 1) * cw]
                self.buffers[receiver][chunk * cw:(chunk + 1) * cw] = [
                    [combine(mine, theirs) for mine, theirs in zip(own_word, word)]
                    for own_word, word in zip(own, words)]

    def all_gather(self, cw):
        self.commands.append(_command(RingOp.ALL_GATHER, cw))
        self._step_chunks(cw, 0, lambda mine, theirs: theirs)

    def reduce_scatter(self, cw):
        self.commands.append(_command(RingOp.REDUCE_SCATTER, cw))
        self._step_chunks(cw, 1, lambda mine, theirs: _signed(mine + theirs, self.acc_width))


def _program(params, rng, extreme):
    cores, n_r, acc = params["cores"], params["n_r"], params["acc_width"]
    low, high = -(1 << (acc - 1)), (1 << (acc - 1)) - 1
    program = _Program(params)

    def words(count):
        return [[[low if extreme else rng.randint(low, high) for _ in range(n_r)] for _ in range(count)]
                for _ in range(cores)]

    cw = rng.randint(1, params["max_blocks"])
    program.write(words(cores * cw))
    program.all_gather(cw)
    program.read(cores * cw)
    cw = rng.randint(1, params["max_blocks"])
    program.write(words(cores * cw))
    program.reduce_scatter(cw)
    program.read(cores * cw)
    program.reduce_scatter(cw)
    program.all_gather(cw)
    program.read(rng.randint(1, cores * cw))
    return program


def scenarios(params, seed):
    table = []
    for name, valid, ready, extreme in (("full rate, cycle exact", None, None, False),
                                        ("input gaps, output stalls", 0.6, 0.5, False),
                                        ("most negative words (sums wrap)", 0.8, 0.7, True)):
        rng = rng_for(seed, "cp_ring", name)
        program = _program(params, rng, extreme)
        handshake = {}
        if valid is not None:
            handshake = {"valid": {"i_cmd": random_pattern(rng, valid), "i_data": random_pattern(rng, valid)},
                         "ready": {"o_data": random_pattern(rng, ready)}}
        table.append(Scenario(name, {"i_cmd": program.commands, "i_data": program.inputs},
                              {"o_data": program.outputs}, **handshake))
    return table


def golden(params, scenario):
    """Run the golden ring-buffer functions command by command; cycles from :func:`ring_schedule`."""
    cores, n_r = params["cores"], params["n_r"]
    buffers = np.zeros((cores, cores * params["max_blocks"], n_r), dtype=np.int64)
    words = iter(scenario.stimulus["i_data"])
    outputs, cycles, accepted = [], [], 0
    for command in scenario.stimulus["i_cmd"]:
        op, count = command["op"], command["words"]
        if op == RingOp.WRITE:
            buffers[:, :count] = np.array([next(words) for _ in range(cores * count)]).reshape(cores, count, n_r)
        elif op == RingOp.READ:
            outputs += buffers[:, :count].reshape(-1, n_r).tolist()
        elif op == RingOp.ALL_GATHER:
            buffers = golden_ring.all_gather_buffers(buffers, count)
        elif op == RingOp.REDUCE_SCATTER:
            buffers = golden_ring.reduce_scatter_buffers(buffers, count, acc_width=params["acc_width"])
        schedule = golden_ring.ring_schedule(op, words=count, **params)
        cycles += [accepted + int(offset) for offset in schedule.output_offsets]
        accepted += schedule.issue_cycles + COMMAND_LATENCY
    timed = not scenario.valid and not scenario.ready
    return Transactions({"o_data": outputs}, {"o_data": cycles} if timed else {})
