"""Output files of the commands, checked before the work that produces them.

A command that trains for minutes (``reduce-model``, ``reduce-contacts``) checks where its
results go first: a mistyped ``--out`` costs one line, not the training.
"""

from __future__ import annotations

import tempfile
from pathlib import Path


def writable_output(out: Path, option: str, suffix: str | None = None) -> Path | str:
    """The file ``out`` will be written as (``suffix`` appended when it has another one), or
    why it cannot be (one line naming ``option``): no file name, a directory there, or a
    folder that cannot be created or written to. Creates the folder."""
    if not out.name or out.name in (".", ".."):
        return f"{option} needs a file name, got {str(out)!r}"
    path = out if suffix is None or out.suffix == suffix else out.with_name(out.name + suffix)
    if path.is_dir():
        return f"{option} {path} is a directory"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        return f"{option}: cannot write {path}: {exc.strerror or exc}"
    return path


def writable_folder(out: Path, option: str) -> str | None:
    """Why the folder ``out`` cannot hold a command's results (one line naming ``option``),
    or None once it exists (created here, with its parents)."""
    if out.exists() and not out.is_dir():
        return f"{option} {out} is a file, not a folder"
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out):
            pass
    except OSError as exc:
        return f"{option}: cannot write into {out}: {exc.strerror or exc}"
    return None
