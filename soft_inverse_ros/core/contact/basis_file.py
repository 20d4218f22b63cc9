"""The reduced contact basis file (``basis.npz``): what ``soft-inverse-ros reduce-contacts``
writes and a robot description's ``collision: reduced_basis:`` loads.

An uncompressed numpy ``.npz`` (no pickles) holding:

- ``format``: ``"soft_inverse_ros.contact_basis"``, ``version``: 1;
- ``nodes`` (n_c,) int64: the mesh nodes (potential contact vertices) of Ψ's rows;
- ``psi`` (n_c, k) ≥ 0: the basis, unit columns (λ = Ψ β [N], β ≥ 0 [N]);
- ``robot``: the name of the description it was built for (information only: a second
  description of the same mesh may use it);
- ``mesh_nodes``: the mesh's node count and ``rest_checksum``: the SHA-256 of its rest
  node positions rounded to 1 nm (:func:`rest_checksum`): a basis is refused for any
  other mesh (another file, cell size, unit or transform);
- ``sweep``: the sweep that made the snapshots (the command-line spec strings),
  ``simulator``: what was swept (``plant``: the simulated robot, ``model``: the
  controller's model), ``hold``: steps held at each posture, ``nnmf``: the algorithm,
  ``snapshots``: snapshot columns with contact force;
- ``error_k`` / ``error`` (K,): the relative reconstruction error ‖S − ΨB‖_F / ‖S‖_F
  of a basis of each size (Goury 2021, Fig. 12).

:func:`save_basis` / :func:`load_basis`; every defect of a file is one
:class:`BasisFileError` line naming the file.
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FORMAT = "soft_inverse_ros.contact_basis"
VERSION = 1
_KEYS = ("format", "version", "nodes", "psi", "robot", "mesh_nodes", "rest_checksum", "sweep", "nnmf",
         "snapshots", "error_k", "error", "simulator", "hold")


class BasisFileError(ValueError):
    """A basis file that cannot be used (missing, malformed, another mesh); one line."""


def rest_checksum(rest_points: np.ndarray) -> str:
    """SHA-256 (hex) of rest node positions (N, 3) [m] rounded to 1 nm: the mesh's identity."""
    nm = np.round(np.asarray(rest_points, dtype=float).reshape(-1, 3) * 1e9).astype(np.int64)
    return hashlib.sha256(np.ascontiguousarray(nm).tobytes()).hexdigest()


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class BasisFile:
    """The content of a basis file (see the module docstring)."""

    nodes: np.ndarray
    psi: np.ndarray
    robot: str
    mesh_nodes: int
    rest_checksum: str
    sweep: tuple[str, ...]
    nnmf: str
    snapshots: int
    error_vs_k: dict[int, float]
    simulator: str = "plant"
    hold: int = 0

    @property
    def k(self) -> int:
        return int(self.psi.shape[1])

    def basis(self):
        """The :class:`~soft_inverse_ros.core.contact.correction.ReducedContactBasis`."""
        from soft_inverse_ros.core.contact.correction import ReducedContactBasis

        return ReducedContactBasis(self.nodes, self.psi)

    def check_mesh(self, rest_points: np.ndarray, *, where: str) -> None:
        """Refuse a mesh whose rest points (N, 3) [m] are not the basis's mesh.

        Raises:
            BasisFileError: another node count or other rest positions (one line).
        """
        n = int(np.asarray(rest_points).reshape(-1, 3).shape[0])
        if n != self.mesh_nodes or rest_checksum(rest_points) != self.rest_checksum:
            what = f"{n} nodes" if n != self.mesh_nodes else "other rest positions"
            raise BasisFileError(
                f"{where}: the basis was built for robot {self.robot!r} on a mesh of {self.mesh_nodes} nodes, "
                f"this mesh has {what}: rebuild it with soft-inverse-ros reduce-contacts")


def save_basis(path: str | Path, data: BasisFile) -> Path:
    """Write ``data`` to ``path`` (``.npz`` added if missing); returns the path written."""
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    ks = np.array(sorted(data.error_vs_k), dtype=np.int64)
    with path.open("wb") as f:
        np.savez(
            f, format=np.str_(FORMAT), version=np.int64(VERSION), nodes=np.asarray(data.nodes, np.int64),
            psi=np.asarray(data.psi, float), robot=np.str_(data.robot), mesh_nodes=np.int64(data.mesh_nodes),
            rest_checksum=np.str_(data.rest_checksum), sweep=np.array(data.sweep, dtype=np.str_),
            nnmf=np.str_(data.nnmf), snapshots=np.int64(data.snapshots), error_k=ks,
            error=np.array([data.error_vs_k[int(k)] for k in ks], dtype=float), simulator=np.str_(data.simulator),
            hold=np.int64(data.hold))
    return path


def load_basis(path: str | Path) -> BasisFile:
    """Read a basis file.

    Raises:
        BasisFileError: missing or unreadable file, not a basis file, another format
            version, or inconsistent arrays (one line naming the file).
    """
    path = Path(path)
    if not path.is_file():
        raise BasisFileError(f"contact basis {path} not found (build one with soft-inverse-ros reduce-contacts)")
    try:
        with np.load(path, allow_pickle=False) as z:
            raw = {key: z[key] for key in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise BasisFileError(f"contact basis {path}: not a readable .npz file ({exc})") from None
    missing = [key for key in _KEYS if key not in raw]
    if missing or str(raw.get("format", "")) != FORMAT:
        raise BasisFileError(f"contact basis {path}: not a contact basis file (missing {missing or ['format']})")
    if int(raw["version"]) != VERSION:
        raise BasisFileError(f"contact basis {path}: format version {int(raw['version'])}, expected {VERSION}")
    try:
        from soft_inverse_ros.core.contact.correction import ReducedContactBasis

        ReducedContactBasis(raw["nodes"], raw["psi"])
    except ValueError as exc:
        raise BasisFileError(f"contact basis {path}: {exc}") from None
    if raw["error_k"].shape != raw["error"].shape:
        raise BasisFileError(f"contact basis {path}: error_k and error differ in length")
    return BasisFile(
        nodes=np.asarray(raw["nodes"], np.int64), psi=np.asarray(raw["psi"], float), robot=str(raw["robot"]),
        mesh_nodes=int(raw["mesh_nodes"]), rest_checksum=str(raw["rest_checksum"]),
        sweep=tuple(str(s) for s in np.atleast_1d(raw["sweep"])), nnmf=str(raw["nnmf"]),
        snapshots=int(raw["snapshots"]),
        error_vs_k={int(k): float(e) for k, e in zip(raw["error_k"], raw["error"])},
        simulator=str(raw["simulator"]), hold=int(raw["hold"]))
