"""An on-disk cache for the arrays a simulated robot computes once at construction.

A reduced plant (core/sim/modal_plant.py) spends seconds of CPU before its first step: the
static equilibrium of the full FEM, a factorization, an eigen-solve, 600 training steps of
the full model and, hyper-reduced, the element sampling (4 s, and 12 s with the sampling,
on the 2-core machine; the simulated robot runs at SCHED_FIFO, so the graph's other nodes
starve meanwhile). The result depends only on the plant's inputs, so it is stored once in
a compressed ``.npz`` and loaded by every later build with the same inputs, like numba's
kernel cache.

The key is a SHA-256 over everything the build reads: the caller's named parts (its
configuration's and robot description's ``repr``, the mesh arrays, ...), the source of
every module of ``soft_inverse_ros.core`` (any change of the code that computes or uses
the arrays invalidates every entry) and the numpy and scipy versions. Entries are written
atomically (a temporary file renamed). An unreadable entry is rebuilt and rewritten; a
cache directory that cannot be written only costs the rebuild (a warning). The directory
is ``$SOFT_INVERSE_ROS_CACHE_DIR`` or ``$XDG_CACHE_HOME/soft_inverse_ros`` (default
``~/.cache/soft_inverse_ros``), subfolder ``plants``; ``SOFT_INVERSE_ROS_CACHE_DIR=off``
disables it. It keeps the :data:`MAX_ENTRIES` entries used last (~1.3 MB each for the
demo's plant): every code change makes new keys, and the old entries would pile up.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

_LOG = logging.getLogger(__name__)

#: environment variable naming the cache directory ("off": no cache)
CACHE_DIR_ENV = "SOFT_INVERSE_ROS_CACHE_DIR"
#: entries kept (the least recently used beyond are deleted when one is written)
MAX_ENTRIES = 24
_CORE = Path(__file__).resolve().parents[1]  # soft_inverse_ros/core


def cache_dir() -> Path | None:
    """The plant cache directory (created on first write), or None when disabled."""
    value = os.environ.get(CACHE_DIR_ENV, "").strip()
    if value.lower() == "off":
        return None
    if value:
        return Path(value).expanduser() / "plants"
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser() / "soft_inverse_ros" / "plants"


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of the source of every module under ``soft_inverse_ros/core`` and of the
    numpy and scipy versions (computed once per process)."""
    import scipy

    digest = hashlib.sha256(f"numpy {np.__version__} scipy {scipy.__version__}".encode())
    for path in sorted(_CORE.rglob("*.py")):
        digest.update(str(path.relative_to(_CORE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(kind: str, parts: Mapping[str, object]) -> str:
    """Hex key of a build of ``kind`` from ``parts`` (name -> str, number or array; arrays
    by dtype, shape and bytes, the rest by ``repr``) and the code fingerprint."""
    digest = hashlib.sha256(kind.encode())
    digest.update(code_fingerprint().encode())
    for name in sorted(parts):
        value = parts[name]
        digest.update(name.encode() + b"\0")
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value)
            digest.update(f"{array.dtype.str}{array.shape}".encode())
            digest.update(array.tobytes())
        else:
            digest.update(repr(value).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def cached_arrays(kind: str, parts: Mapping[str, object],
                  build: Callable[[], dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], bool]:
    """The arrays ``build()`` returns for these inputs: from the cache when an entry exists
    (``(arrays, True)``), else built, stored and returned (``(arrays, False)``).

    ``build`` must return a dict of numpy arrays (scalars as 0-d arrays) that depends only
    on ``parts`` and the code.
    """
    folder = cache_dir()
    if folder is None:
        return build(), False
    path = folder / f"{kind}-{cache_key(kind, parts)[:40]}.npz"
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
            os.utime(path)  # used now (the pruning keeps the entries used last)
            return arrays, True
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            _LOG.warning("plant cache entry %s unreadable (%s): rebuilding", path, exc)
    arrays = build()
    temporary = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".npz.tmp", delete=False) as handle:
            temporary = handle.name
            np.savez_compressed(handle, **arrays)
        os.replace(temporary, path)
        _prune(folder)
    except OSError as exc:
        _LOG.warning("plant cache %s not writable (%s): the build is not kept", folder, exc)
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
    return arrays, False


def _prune(folder: Path) -> None:
    """Delete the least recently used entries beyond :data:`MAX_ENTRIES` (entries another
    process removes meanwhile are skipped)."""
    used = []
    for entry in folder.glob("*.npz"):
        try:
            used.append((entry.stat().st_mtime, entry))
        except OSError:
            continue
    for _, old in sorted(used, reverse=True)[MAX_ENTRIES:]:
        try:
            old.unlink()
        except OSError:
            pass
