"""``trainforge neurotrainer area`` (Table 1): argument errors, and the variants it synthesises.

The synthesis itself takes minutes per variant (generic Yosys on a 32x32 and two 16x16
multipliers), so it runs under ``make synth``-like commands, not in the suite; here the
variants are checked to be distinct, emittable ``nt_mac`` configurations.
"""
import subprocess
import sys

from trainforge.emit import emit
from trainforge.hw.neurotrainer.mac import NTMAC
from trainforge.commands.neurotrainer.area import PAPER_AREA_UM2, VARIANTS


def test_bad_lanes_exits_2_and_writes_nothing(tmp_path):
    result = subprocess.run([sys.executable, "-m", "trainforge.cli", "neurotrainer", "area", "--lanes", "0",
                             "--out", str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "lanes" in result.stderr and "0" in result.stderr and "1..64" in result.stderr, result.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "build").exists()


def test_variants_are_the_mac_rounding_choices_and_emit_distinct_verilog():
    rounding = NTMAC.PARAMS["rounding"]
    assert set(VARIANTS) == set(rounding.choices), (VARIANTS, rounding.choices)
    assert VARIANTS[0] == "truncate"
    texts = {variant: emit("nt_mac", lanes=1, rounding=variant).text for variant in VARIANTS}
    assert len(set(texts.values())) == len(VARIANTS)
    assert set(PAPER_AREA_UM2) - {"float32"} <= set(VARIANTS)
