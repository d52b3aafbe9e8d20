"""Writing outputs: atomically, and checked before the long work that makes them.

Every report, table, plot or Verilog file that trainforge writes goes
through :func:`write_text`, :func:`write_bytes`, :func:`write_json` or
:func:`save_figure`: the content is written to a temporary file in the target
folder and renamed over the target, so an interrupted or failed run never
leaves a partial file. :func:`check_output` runs before a command starts its
work, so a bad ``--out`` fails in a second rather than after an hour.
"""
import contextlib
import json
import os
import pathlib
import tempfile

from .errors import UsageError

__all__ = ["check_output", "staged", "write_bytes", "write_text", "write_json", "save_figure"]

#: Writes held back by :func:`staged` (a list of ``(path, bytes)``), or ``None`` when writes go straight to disk.
_staged = None


def _writable_folder(folder, path):
    """Raise :class:`UsageError` unless ``folder`` is (or can be created as) a writable folder."""
    existing = folder
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"cannot write {path}: {existing} is not a folder")
    # Permission bits do not tell (root passes os.access everywhere, /proc refuses files to root):
    # create a temporary file where the first missing folder would go, and remove it at once.
    try:
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".trainforge-probe-")
    except OSError as error:
        raise UsageError(f"cannot write {path}: {existing}: {error.strerror or error}") from None
    os.close(handle)
    os.unlink(probe)


def _is_json_object(path):
    try:
        with open(path, "rb") as stream:
            return isinstance(json.loads(stream.read(64 << 20)), dict)
    except (OSError, ValueError):
        return False


def check_output(path, kind="file"):
    """Check, before any work, that ``path`` can be written.

    Parameters
    ----------
    path : str or pathlib.Path
        The output file, or folder when ``kind`` is ``"dir"``.
    kind : str
        ``"file"``: ``path`` must not be a folder and its folder must be writable
        (created when missing). ``"dir"``: ``path`` must be a folder or creatable as one.

    Raises
    ------
    UsageError
        Naming the path and why it cannot be written.
    """
    path = pathlib.Path(path)
    if kind == "dir":
        if path.exists() and not path.is_dir():
            raise UsageError(f"cannot write into {path}: it is not a folder")
        _writable_folder(path, path)
        return path
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"cannot write {path}: permission denied")
    if path.exists() and not _is_json_object(path):
        # A report replaces only a report: never a user's file that merely has the same name (--out /etc/passwd).
        raise UsageError(f"will not replace {path}: it exists and is not a JSON report; remove it or choose another --out")
    _writable_folder(path.parent if str(path.parent) else pathlib.Path("."), path)
    return path


@contextlib.contextmanager
def staged():
    """Hold every write made inside the block in memory; write them all when the block ends normally.

    A command that makes several files (a report and its plots) thus writes
    none of them when it fails or is interrupted (Ctrl-C) part way, and all of
    them, each atomically, in quick succession when it completes. Commands
    that must write as they go (``synth`` and ``fpga`` write after every block)
    do not use it.
    """
    global _staged
    outer, _staged = _staged, []
    try:
        yield
        pending = _staged
    finally:
        _staged = outer
    for path, data in pending:
        write_bytes(path, data)


def write_bytes(path, data):
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, then rename).

    Inside :func:`staged` the write is held until the staged block ends.
    """
    path = pathlib.Path(path)
    if _staged is not None:
        _staged.append((path, bytes(data)))
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    return path


def write_text(path, text):
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return write_bytes(path, text.encode())


def write_json(path, payload, indent=2, **options):
    """Write ``payload`` as JSON (with a final newline) to ``path`` atomically.

    A dict written during a ``trainforge`` command carries the command's
    provenance (:func:`trainforge.provenance.current`) under ``provenance``.
    """
    from .provenance import current

    stamp = current()
    if isinstance(payload, dict) and stamp is not None:
        payload = {**payload, "provenance": stamp}
    return write_text(path, json.dumps(payload, indent=indent, **options) + "\n")


def save_figure(figure, path, **options):
    """Save a matplotlib ``figure`` to ``path`` atomically; the format follows the file name's suffix."""
    import io

    path = pathlib.Path(path)
    buffer = io.BytesIO()
    figure.savefig(buffer, format=path.suffix.lstrip(".") or "png", **options)
    return write_bytes(path, buffer.getvalue())
