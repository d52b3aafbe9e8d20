"""The fixed-point training model (``sim/neurotrainer/fixed_training.py``) and ``trainforge neurotrainer training``.

- The vectorised MAC-array arithmetic (matrix product, elementwise product, weight update)
  equals the golden ``nt_mac`` model bit-exactly, fed the same row stream, for every rounding.
- With many fraction bits every variant tracks float64; with few, truncation turns sub-LSB
  weight updates into nothing (or a full LSB down) while SR keeps them in expectation, and
  the truncated RNN fails to learn where SR and SR-LO track float.
"""
import json
import os

import numpy as np
import pytest

from trainforge.cli import main
from trainforge.golden.neurotrainer.mac import nt_mac, xorshift_seeds, xorshift_words
from trainforge.golden.neurotrainer.rounding_stats import sr_lo_predicted_bias
from trainforge.errors import ParameterError
from trainforge.sim.neurotrainer.fixed_training import (FIXED_ROUNDINGS, NETWORKS, MacArray, load_data, train,
                                                        xorshift_skip, xorshift_stream)

SEED = int(os.environ.get("SEED", "20240"))


def _where(**extra):
    return "SEED=" + str(SEED) + "".join(f" {key}={value}" for key, value in extra.items())


def _signed32(words):
    words = np.asarray(words, dtype=np.int64)
    return np.where(words >= 1 << 31, words - (1 << 32), words)


class _RowStream:
    """The rows that the model's operations execute, in order, for the golden ``nt_mac``."""

    def __init__(self, lanes):
        self.lanes = lanes
        self.a, self.x, self.clear, self.read, self.results = [], [], [], [], []

    def matmul(self, a, b):
        """Rows of ``a @ b`` (m, tile, k order); returns the slice of read results that form the product."""
        rows, depth = a.shape
        columns = b.shape[1]
        tiles = -(-columns // self.lanes)
        padded = np.zeros((depth, tiles * self.lanes), dtype=np.int64)
        padded[:, :columns] = b
        first = len(self.results)
        for m in range(rows):
            for tile in range(tiles):
                for k in range(depth):
                    self.a.append(int(a[m, k]) & 0xFFFFFFFF)
                    self.x.append(padded[k, tile * self.lanes:(tile + 1) * self.lanes] & 0xFFFFFFFF)
                    self.clear.append(k == 0)
                    self.read.append(k == depth - 1)
                self.results.append((m, tile))
        return first, rows, tiles, columns

    def multiply(self, a, b):
        """Rows of the elementwise product (one per element, lane 0)."""
        a_column = a.reshape(-1, 1)
        first = len(self.results)
        for index in range(a_column.size):
            self.matmul(a_column[index:index + 1], b.reshape(1, -1)[:, index:index + 1])
        return first, a.shape

    def run(self, **params):
        count = len(self.a)
        return _signed32(nt_mac(self.a, np.array(self.x), np.ones(count, bool), np.ones(count, bool), self.clear,
                                self.read, lanes=self.lanes, **params))


@pytest.mark.parametrize("rounding", FIXED_ROUNDINGS)
@pytest.mark.parametrize("frac_bits", [3, 16])
def test_mac_array_equals_golden_mac(rounding, frac_bits):
    """Matrix products (partial tiles, saturation), elementwise products and updates, bit-exact, > 255 rows."""
    rng = np.random.default_rng(SEED)
    lanes, seed = 4, 1 + SEED % 255
    model = MacArray(rounding, frac_bits=frac_bits, lanes=lanes, seed=seed)
    stream = _RowStream(lanes)
    expected = []
    for rows, depth, columns, bound in [(3, 5, 6, 1 << 20), (2, 7, 4, 1 << 31), (40, 9, 3, 1 << 20)]:
        a = rng.integers(-bound, bound, (rows, depth))
        b = rng.integers(-(1 << 20), 1 << 20, (depth, columns))
        expected.append(("matmul", model.matmul(a, b), stream.matmul(a, b)))
    a, b = rng.integers(-(1 << 24), 1 << 24, (2, 3)), rng.integers(-(1 << 24), 1 << 24, (2, 3))
    expected.append(("multiply", model.multiply(a, b), stream.multiply(a, b)))
    weights, gradient = rng.integers(-(1 << 28), 1 << 28, (3, 3)), rng.integers(-(1 << 28), 1 << 28, (3, 3))
    scale = int(rng.integers(-(1 << frac_bits), 1 << frac_bits))
    update = stream.matmul(np.array([[1 << frac_bits, scale]]), np.stack([weights.ravel(), gradient.ravel()]))
    expected.append(("axpy", model.axpy(scale, gradient, weights).ravel()[None, :], update))
    assert len(stream.a) > 255, len(stream.a)  # SR-LO's word table wraps its period
    golden = stream.run(frac_bits=frac_bits, rounding=rounding, seed=seed)
    for name, got, layout in expected:
        if name == "multiply":
            first, shape = layout
            want = golden[first:first + int(np.prod(shape)), 0].reshape(shape)
        else:
            first, rows, tiles, columns = layout
            want = golden[first:first + rows * tiles].reshape(rows, tiles * lanes)[:, :columns]
        assert np.array_equal(got, want), (f"{name}: expected (golden nt_mac)\n{want}\ngot\n{got}\n"
                                           + _where(rounding=rounding, frac_bits=frac_bits))
    assert model.rows == len(stream.a), (len(stream.a), model.rows)


def test_mac_array_rejects_parameters_the_block_rejects():
    with pytest.raises(ParameterError, match="seed.*300"):
        MacArray("sr_lo", seed=300)
    with pytest.raises(ParameterError, match="frac_bits.*31"):
        MacArray("truncate", frac_bits=31)


@pytest.mark.parametrize("count", [1, 15, 16, 17, 1000])
def test_xorshift_stream_continues_the_golden_generators(count):
    seed = 1 + SEED % 1000
    reference = xorshift_words(seed, 5, count + 1)
    words, states = xorshift_stream(xorshift_seeds(seed, 5), count)
    assert np.array_equal(words, reference[:count]), _where(count=count)
    assert np.array_equal(states, reference[count]), (reference[count], states, _where(count=count))
    assert np.array_equal(xorshift_skip(xorshift_seeds(seed, 5), count), reference[count]), _where(count=count)


def _small_data():
    train_x, train_y, test_x, test_y = load_data()
    return train_x[:192], train_y[:192], test_x[:100], test_y[:100]


@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_many_fraction_bits_track_float(network):
    """Q7.24: every variant's weights stay within 1e-4 of float64's and the losses agree to 1e-3."""
    data = _small_data()
    reference = train(NETWORKS[network](), "float", data, epochs=1, seed=SEED % 7)
    for rounding in FIXED_ROUNDINGS:
        result = train(NETWORKS[network](), rounding, data, epochs=1, seed=SEED % 7, frac_bits=24)
        difference = max(np.abs(a - b).max() for a, b in zip(result["weights"], reference["weights"]))
        assert difference < 1e-4, (difference, _where(network=network, rounding=rounding))
        assert np.allclose(result["loss"], reference["loss"], atol=1e-3), \
            (reference["loss"], result["loss"], _where(network=network, rounding=rounding))
        assert abs(result["accuracy"][-1] - reference["accuracy"][-1]) <= 0.02, \
            (reference["accuracy"], result["accuracy"], _where(network=network, rounding=rounding))


@pytest.mark.parametrize("rounding", FIXED_ROUNDINGS)
def test_sub_lsb_weight_updates(rounding):
    """Increments of 0..1 LSB: truncation leaves every weight unchanged, SR adds them in expectation.

    Negative increments of -1..0 LSB: truncation takes a full LSB off every weight (it floors).
    """
    frac_bits, lanes, repeats = 8, 32, 40
    rng = np.random.default_rng(SEED)
    model = MacArray(rounding, frac_bits=frac_bits, lanes=lanes, seed=1 + SEED % 255)
    weights = rng.integers(-(1 << 12), 1 << 12, (repeats, 1024))
    fractions = rng.integers(0, 1 << frac_bits, (repeats, 1024))  # increment = fraction / 2**F LSB
    steps = np.array([model.axpy(1, fractions[r], weights[r]) for r in range(repeats)]) - weights
    down = np.array([model.axpy(-1, fractions[r], weights[r]) for r in range(repeats)]) - weights
    exact = fractions / float(1 << frac_bits)
    if rounding == "truncate":
        assert not steps.any(), (np.count_nonzero(steps), _where(rounding=rounding))
        assert np.array_equal(down, np.where(fractions > 0, -1, 0)), _where(rounding=rounding)
        return
    assert set(np.unique(steps)) <= {0, 1}, (np.unique(steps), _where(rounding=rounding))
    if rounding == "nearest":
        assert np.array_equal(steps, (fractions >= 1 << (frac_bits - 1)).astype(int)), _where(rounding=rounding)
        return
    # SR: unbiased. SR-LO shares one word per tile of 32 lanes, so the tiles are the samples.
    tile_errors = (steps - exact).reshape(-1, lanes).mean(axis=1)
    sigma = tile_errors.std() / np.sqrt(tile_errors.size)
    bias = sr_lo_predicted_bias(frac_bits) if rounding == "sr_lo" else 0.0
    assert abs(tile_errors.mean()) < 3 * sigma + bias, (tile_errors.mean(), sigma, _where(rounding=rounding))
    assert steps.mean() > 0.4, (steps.mean(), exact.mean(), _where(rounding=rounding))


def test_few_fraction_bits_truncated_rnn_fails_where_sr_tracks_float():
    """Q23.8: the truncated RNN's loss does not fall; SR, SR-LO (and nearest) stay within 0.02 of float64's."""
    data = _small_data()
    seed = SEED % 7
    reference = train(NETWORKS["rnn"](), "float", data, epochs=2, seed=seed)
    assert reference["loss"][-1] < reference["loss"][0] - 0.2, (reference["loss"], _where())
    for rounding in FIXED_ROUNDINGS:
        result = train(NETWORKS["rnn"](), rounding, data, epochs=2, seed=seed, frac_bits=8)
        if rounding == "truncate":
            assert result["loss"][-1] > reference["loss"][0], (reference["loss"], result["loss"], _where())
        else:
            assert abs(result["loss"][-1] - reference["loss"][-1]) < 0.02, \
                (reference["loss"], result["loss"], _where(rounding=rounding))


def test_cli_quick_run_writes_json_and_png(tmp_path, capsys):
    status = main(["neurotrainer", "training", "--quick", "--networks", "mlp", "--roundings", "float,sr_lo",
                   "--frac-bits", "12", "--out", str(tmp_path)])
    assert status == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "training.json").read_text())
    assert [(row["rounding"], row["frac_bits"]) for row in report["results"]] == [("float", None), ("sr_lo", 12)]
    assert all(len(row["mean_curve"]) == 2 for row in report["results"]), report["results"]
    assert (tmp_path / "training.png").stat().st_size > 0


@pytest.mark.parametrize("argument", [["--frac-bits", "31"], ["--roundings", "float,round"], ["--epochs", "0"],
                                      ["--lanes", "65"], ["--networks", "cnn"]])
def test_cli_rejects_bad_arguments_and_writes_nothing(tmp_path, capsys, argument):
    status = main(["neurotrainer", "training", *argument, "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert status == 2, (argument, status, error)
    assert argument[1].split(",")[-1] in error, (argument, error)
    assert not (tmp_path / "out").exists()
