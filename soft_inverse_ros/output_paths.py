"""Output files of the commands, checked before the work that produces them.

A command that trains for minutes (``reduce-model``, ``reduce-contacts``) checks where its
results go first: a mistyped ``--out`` costs one line, not the training.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: the suffix of a figure named without one: the format matplotlib writes it in by default
FIGURE_SUFFIX = ".png"


def writable_output(out: Path, option: str, suffix: str | None = None) -> Path | str:
    """The file ``out`` will be written as (``suffix`` appended when it has another one), or
    why it cannot be (one line naming ``option``): no file name, a directory there, or a
    folder that cannot be created or written to. Creates the folder."""
    if not out.name or out.name in (".", ".."):
        return f"{option} needs a file name, got {str(out)!r}"
    if out.is_dir():
        return f"{option} {out} is a directory"
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


def writable_figure(out: str | Path, option: str) -> Path | str:
    """The image file the figure ``out`` will be written as (``.png`` appended when its name
    has no suffix, as matplotlib does), or why it cannot be (one line naming ``option``): a
    folder (a trailing separator, or a directory there), a format matplotlib does not write,
    or a reason of :func:`writable_output`. Pass the option's text: a Path drops a trailing
    separator. Creates the folder."""
    text, path = str(out), Path(out)
    if path.name in ("", ".", ".."):
        return writable_output(path, option)  # no file name
    if text.endswith(tuple(sep for sep in (os.sep, os.altsep) if sep)) or path.is_dir():
        return f"{option} {text} is a directory: give the figure's file name"
    if not path.suffix:
        path = path.with_name(path.name + FIGURE_SUFFIX)
    return _figure_format_problem(path, option) or writable_output(path, option)


def _figure_format_problem(path: Path, option: str) -> str | None:
    """Why matplotlib cannot write ``path`` (its suffix names no format it writes), or None."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() in formats:
        return None
    return (f"{option} {path}: matplotlib writes no {path.suffix!r} images "
            f"(it writes {', '.join('.' + f for f in sorted(formats))})")


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
