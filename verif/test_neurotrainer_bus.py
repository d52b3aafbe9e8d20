"""The bus golden model (``golden/neurotrainer/bus.py``) against a cycle-by-cycle reference of the bus rules."""
import numpy as np
import pytest

from trainforge.golden.neurotrainer.bus import LATENCY, nt_bus
from trainforge.hw.neurotrainer.bus import NTBus
from trainforge.errors import ParameterError


def cycle_by_cycle(broadcast_data, broadcast_end, merge_data, merge_end, *, pes, width, broadcast_start,
                   broadcast_mask, request_cycle):
    """Steps the rules of :class:`NTBus` one cycle at a time (every sink ready, every source valid)."""
    word_mask = (1 << width) - 1
    trace = np.atleast_1d(broadcast_mask)
    delivered = [[] for _ in range(pes)]
    merged, grants = [], []
    broadcast_next = 0
    taken = [0] * pes
    grant = None
    cycle = 0
    while broadcast_next < len(broadcast_data) or any(taken[pe] < len(merge_data[pe]) for pe in range(pes)):
        broadcasting = broadcast_start <= cycle and broadcast_next < len(broadcast_data)
        request = [cycle >= request_cycle[pe] and taken[pe] < len(merge_data[pe]) for pe in range(pes)]
        next_grant = grant
        if broadcasting:
            mask = int(trace[min(cycle, len(trace) - 1)])
            for pe in range(pes):
                if mask >> pe & 1:
                    delivered[pe].append((int(broadcast_data[broadcast_next]) & word_mask,
                                          bool(broadcast_end[broadcast_next]), cycle + LATENCY))
            broadcast_next += 1
        elif grant is not None and taken[grant] < len(merge_data[grant]):
            index = taken[grant]
            end = bool(merge_end[grant][index])
            merged.append((grant, int(merge_data[grant][index]) & word_mask, end, cycle + LATENCY))
            taken[grant] += 1
            if end:
                next_grant = None
        if grant is None and not broadcasting and any(request):
            next_grant = request.index(True)
            grants.append((next_grant, cycle + 1))
        if grant is not None and taken[grant] == len(merge_data[grant]) and not merge_end[grant][-1] \
                and broadcast_next == len(broadcast_data):
            break   # a final burst without END-MARK keeps the bus: nobody else is served
        grant = next_grant
        cycle += 1
    return delivered, merged, grants


def random_case(rng, pes, width):
    merge_data, merge_end = [], []
    for _ in range(pes):
        count = int(rng.integers(0, 30))
        merge_data.append(rng.integers(0, 1 << width, count))
        ends = rng.random(count) < 0.25
        if count and rng.random() < 0.9:
            ends[-1] = True
        merge_end.append(ends)
    broadcast_count = int(rng.integers(0, 60))
    return dict(
        broadcast_data=rng.integers(0, 1 << 32, broadcast_count),
        broadcast_end=rng.random(broadcast_count) < 0.1,
        merge_data=merge_data, merge_end=merge_end,
        pes=pes, width=width,
        broadcast_start=int(rng.integers(0, 80)),
        broadcast_mask=rng.integers(0, 1 << pes, int(rng.integers(1, 200))),
        request_cycle=rng.integers(0, 60, pes),
    )


@pytest.mark.parametrize("pes,width", [(2, 16), (3, 32), (16, 32)])
def test_golden_matches_the_cycle_by_cycle_rules(pes, width):
    rng = np.random.default_rng(pes * 100 + width)
    for _ in range(40):
        case = random_case(rng, pes, width)
        golden = nt_bus(**case)
        delivered, merged, grants = cycle_by_cycle(**case)
        for pe in range(pes):
            got = list(zip(golden["broadcast"][pe]["data"].tolist(), golden["broadcast"][pe]["end"].tolist(),
                           golden["broadcast"][pe]["cycles"].tolist()))
            assert got == delivered[pe], f"PE {pe}: expected {delivered[pe]}, got {got}"
        merge = golden["merge"]
        got = list(zip(merge["source"].tolist(), merge["data"].tolist(), merge["end"].tolist(),
                       merge["cycles"].tolist()))
        assert got == merged, f"merge: expected {merged}, got {got}"
        assert golden["grant_cycles"] == grants, f"grants: expected {grants}, got {golden['grant_cycles']}"


def test_simultaneous_requests_go_lowest_index_first_after_the_broadcast():
    pes = 4
    merge_data = [np.arange(3) + 10 * pe for pe in range(pes)]
    merge_end = [np.array([False, False, True])] * pes
    golden = nt_bus(np.arange(5), np.zeros(5, bool), merge_data, merge_end, pes=pes, broadcast_start=0)
    assert [pe for pe, _ in golden["grant_cycles"]] == [0, 1, 2, 3]
    # Broadcast in cycles 0..4, first grant from 6 (arbitration in 5), one idle cycle between bursts.
    assert golden["grant_cycles"][0][1] == 6
    assert golden["merge"]["cycles"].tolist() == [c + LATENCY for c in (6, 7, 8, 10, 11, 12, 14, 15, 16, 18, 19, 20)]


def test_parameters_are_checked():
    with pytest.raises(ParameterError, match="'width' = 24"):
        NTBus(width=24)
    with pytest.raises(ParameterError, match="'pes' = 17"):
        NTBus(pes=17)
    with pytest.raises(ParameterError, match="'pes' = 1"):
        NTBus(pes=1)
