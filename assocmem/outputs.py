"""Output paths, checked before the work starts (every command with an output flag).

:func:`output_file` and :func:`output_dir` raise a ``ValueError`` naming the
flag for an empty path, a folder where a file is wanted (or the reverse), a
missing parent folder, an existing result that must not be overwritten, or a
place that cannot be written (``/proc``, a read-only disk, a name too long).
Writability is probed by creating the file (or the folders and a file in
them) and removing what was created, so a refused or accepted check leaves
nothing behind and the real write at the end cannot fail on the path.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from assocmem.validate import ParamError

NAME_MAX = 255


def _fail(flag: str, msg: str):
    raise ParamError(flag, f"{flag}: {msg}")


def _basic(flag: str, path) -> Path:
    if path is None or not str(path).strip():
        _fail(flag, "empty path (give a file or folder name)")
    text = str(path)
    if "\0" in text:
        _fail(flag, "the path contains a NUL character")
    for part in Path(text).parts:
        if len(os.fsencode(part)) > NAME_MAX:
            _fail(flag, f"a name in the path is longer than {NAME_MAX} bytes")
    return Path(text)


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _parent_ok(flag: str, p: Path, parents: bool) -> list[Path]:
    """Check (or, with ``parents``, plan to create) the folder that will hold ``p``;
    returns the folders that would have to be created, outermost first."""
    parent = p.parent
    missing = []
    a = parent
    while not a.exists():
        if a.is_symlink():
            _fail(flag, f"'{a}' is a broken link")
        missing.append(a)
        if a.parent == a:
            break
        a = a.parent
    if a.exists() and not a.is_dir():
        _fail(flag, f"'{a}' is a file, not a folder")
    if missing and not parents:
        _fail(flag, f"folder '{parent}' does not exist (create it first)")
    return list(reversed(missing))


def _probe_dirs(flag: str, to_make: list[Path]) -> list[Path]:
    made = []
    try:
        for d in to_make:
            d.mkdir()
            made.append(d)
    except OSError as exc:
        _cleanup(made)
        _fail(flag, f"cannot create folder '{to_make[len(made)]}' ({_why(exc)})")
    return made


def _cleanup(made: list[Path]) -> None:
    for d in reversed(made):
        try:
            d.rmdir()
        except OSError:
            pass


def output_file(flag: str, path, *, overwrite: bool = True, parents: bool = False,
                force_flag: str = "--force") -> Path:
    """A file the command will write.  ``overwrite=False``: an existing file is
    refused (``force_flag`` overrides); ``parents``: missing folders are created
    (for a default location such as ``runs/``; a path the user typed must have
    an existing folder, so a typo is not silently created)."""
    p = _basic(flag, path)
    try:
        if p.is_dir():
            _fail(flag, f"'{p}' is a folder; give a file name")
        if p.exists():
            if not overwrite:
                _fail(flag, f"'{p}' exists; use {force_flag} to overwrite it")
            with open(p, "ab"):          # opening for append changes nothing
                pass
            return p
        made = _probe_dirs(flag, _parent_ok(flag, p, parents))
        try:
            with open(p, "xb"):
                pass
            os.unlink(p)
        except OSError as exc:
            _cleanup(made)
            _fail(flag, f"cannot write '{p}' ({_why(exc)})")
        # folders made for ``parents`` stay: the write at the end needs them
    except OSError as exc:
        _fail(flag, f"cannot use '{p}' ({_why(exc)})")
    return p


def output_dir(flag: str, path) -> Path:
    """A folder the command will create (with missing parents: no, its parent
    must exist) and write files into."""
    p = _basic(flag, path)
    try:
        if p.exists():
            if not p.is_dir():
                _fail(flag, f"'{p}' is a file, not a folder")
            made = []
        else:
            made = _probe_dirs(flag, _parent_ok(flag, p, parents=False) + [p])
        try:
            fd, tmp = tempfile.mkstemp(dir=p, prefix=".assocmem-probe-")
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            _fail(flag, f"cannot write into '{p}' ({_why(exc)})")
        finally:
            _cleanup(made)
    except OSError as exc:
        _fail(flag, f"cannot use '{p}' ({_why(exc)})")
    return p
