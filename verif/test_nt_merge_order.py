"""The bus's merge order (PE 0, 1, ..., one result block per turn) on 3 PEs, in the default test run.

``nt_system``'s registry parameter sets with 3 and 4 PEs run only with ``--regress``; with 2
PEs a turn order that, e.g., skips back to PE 0 after PE 1 is indistinguishable from the right
one. This runs the table's merged scenarios (several result blocks per PE) on the RTL with 3
PEs and one lane, on Icarus, and checks every vault word against the reference executor.
"""
from trainforge import simulation


def test_merge_order_with_three_pes_on_the_rtl(seed):
    simulation.run("nt_system", "tb_nt_system", {"pes": 3, "lanes": 1}, "icarus", seed, testcase="merged_scenarios")
