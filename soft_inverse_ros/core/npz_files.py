"""Reading and fingerprinting the ``.npz`` files the commands write (a model reduction, a
contact basis): one clear line for a file that is not one, and a checksum of the entries so
that a damaged or edited file is refused rather than used."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np


def read_npz(path: Path, what: str, hint: str, error: type[Exception]) -> dict[str, np.ndarray]:
    """The entries of the ``.npz`` file at ``path`` (no pickles), or ``error`` (one line
    naming ``what`` the file should be and ``hint``, how to make one): unreadable, not a zip
    archive (a text file or an ``.npy`` renamed), pickled objects, a damaged archive."""
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise error(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if not head.startswith(b"PK"):  # a zip archive, as numpy.savez writes
        raise error(f"{path} is not a {what} (not an .npz archive): {hint}")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        if "allow_pickle" in str(exc):
            raise error(f"{path} holds pickled Python objects, which no {what} file contains; not read") from None
        raise error(f"cannot read the {what} {path} (a damaged .npz file?): {exc}") from None


def entries_digest(entries: Mapping[str, np.ndarray], keys: Sequence[str]) -> str:
    """SHA-256 of ``entries[key]`` for ``keys`` in order (name, dtype, shape and bytes): what a
    writer stores beside them and a reader compares."""
    h = hashlib.sha256()
    for key in keys:
        a = np.ascontiguousarray(entries[key])
        h.update(key.encode() + str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()
