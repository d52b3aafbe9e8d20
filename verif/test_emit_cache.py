"""The emission cache of ``make test`` (:func:`trainforge.emit.emit_cached`): same Verilog, keyed on the sources."""
import pytest

from trainforge import emit as emit_module
from trainforge.emit import emit, emit_cached, source_fingerprint
from trainforge.errors import ParameterError


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "emit"
    monkeypatch.setattr(emit_module, "EMIT_CACHE", folder)
    monkeypatch.delenv(emit_module.EMIT_CACHE_ENV, raising=False)
    return folder


def test_a_cached_emission_is_the_emission(cache_dir, monkeypatch):
    fresh = emit("dense_pe", lanes=2)
    first = emit_cached("dense_pe", lanes=2)
    assert len(list(cache_dir.glob("dense_pe-*.json"))) == 1

    def no_elaboration(*args, **kwargs):
        raise AssertionError("elaborated although the cache holds this block and these parameters")

    monkeypatch.setattr(emit_module, "emit", no_elaboration)
    second = emit_cached("dense_pe", lanes=2)
    for cached in (first, second):
        assert cached.text == fresh.text
        assert cached.ports == fresh.ports
        assert cached.params == fresh.params


def test_other_parameters_are_another_entry(cache_dir):
    two, four = emit_cached("dense_pe", lanes=2), emit_cached("dense_pe", lanes=4)
    assert two.text != four.text
    assert len(list(cache_dir.glob("dense_pe-*.json"))) == 2


def test_parameters_are_validated_before_the_cache(cache_dir):
    with pytest.raises(ParameterError, match="lanes"):
        emit_cached("dense_pe", lanes=0)
    assert not cache_dir.exists()


def test_the_cache_can_be_turned_off(cache_dir, monkeypatch):
    monkeypatch.setenv(emit_module.EMIT_CACHE_ENV, "0")
    assert emit_cached("stream_stage").text == emit("stream_stage").text
    assert not cache_dir.exists()


def test_a_damaged_entry_is_elaborated_again(cache_dir):
    emit_cached("stream_stage")
    (entry,) = cache_dir.glob("stream_stage-*.json")
    entry.write_text("{not json")
    assert emit_cached("stream_stage").text == emit("stream_stage").text


def test_the_fingerprint_follows_every_source_file(tmp_path):
    sources = tmp_path / "hw"
    (sources / "sub").mkdir(parents=True)
    generator = sources / "sub" / "block.py"
    generator.write_text("WIDTH = 8\n")

    def fingerprint():
        source_fingerprint.cache_clear()
        return source_fingerprint((sources,))

    original = fingerprint()
    generator.write_text("WIDTH = 9\n")
    edited = fingerprint()
    assert edited != original
    (sources / "new.py").write_text("")
    added = fingerprint()
    assert added != edited
    generator.rename(sources / "sub" / "renamed.py")
    assert fingerprint() != added
    renamed = fingerprint()
    # Byte code and docs do not enter the Verilog.
    (sources / "__pycache__").mkdir()
    (sources / "__pycache__" / "block.cpython.pyc").write_bytes(b"\0")
    (sources / "README.md").write_text("notes")
    assert fingerprint() == renamed


def test_the_fingerprint_covers_the_generators_and_the_spec():
    roots = {path.name for path in emit_module.FINGERPRINT_SOURCES}
    assert {"hw", "spec", "emit.py"} <= roots
    assert all(path.exists() for path in emit_module.FINGERPRINT_SOURCES)
    assert (emit_module.ROOT / "hw" / "registry.py").exists()


def test_the_verilog_command_takes_cached_blocks_and_renames_fresh(cache_dir, monkeypatch):
    """``trainforge verilog`` (``elaborate_all(..., cached=True)``) reuses the cache; ``--name`` elaborates."""
    from trainforge.emit import elaborate_all

    fresh = emit("dense_pe", lanes=2)
    first, = elaborate_all(["dense_pe"], ["lanes=2"], cached=True)
    assert first.text == fresh.text and first.module == "dense_pe"
    assert len(list(cache_dir.glob("dense_pe-*.json"))) == 1
    renamed, = elaborate_all(["dense_pe"], ["lanes=2"], module="pe_a", cached=True)
    assert renamed.module == "pe_a" and "module pe_a" in renamed.text

    def no_elaboration(*args, **kwargs):
        raise AssertionError("elaborated although the cache holds this block and these parameters")

    monkeypatch.setattr(emit_module, "emit", no_elaboration)
    second, = elaborate_all(["dense_pe"], ["lanes=2"], cached=True)
    assert second.text == fresh.text
