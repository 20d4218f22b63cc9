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
  of a basis of each size (Goury 2021, Fig. 12);
- ``collision_model``: what touched in the sweep (:func:`collision_model_of`: self-collision
  and the obstacles): a description with another collision model is refused;
- ``contents_sha256``: the SHA-256 of every other entry (``core/npz_files.py``): a
  damaged or edited file is refused.

Files written before ``collision_model`` and ``contents_sha256`` existed are read without
those two checks. :func:`save_basis` / :func:`load_basis`; every defect of a file is one
:class:`BasisFileError` line naming the file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from soft_inverse_ros.core.npz_files import entries_digest, read_npz

FORMAT = "soft_inverse_ros.contact_basis"
VERSION = 1
_KEYS = ("format", "version", "nodes", "psi", "robot", "mesh_nodes", "rest_checksum", "sweep", "nnmf",
         "snapshots", "error_k", "error", "simulator", "hold")
#: the entries the checksum covers (all but format, version and the checksum itself)
_DIGESTED = _KEYS[2:] + ("collision_model",)
#: largest deviation of a column norm of Ψ from 1 (the factorization writes unit columns)
_UNIT_TOLERANCE = 1e-6


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
    collision_model: str = ""  #: :func:`collision_model_of` of the sweep's robot ("" in older files)

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

    def check_collision(self, spec, *, where: str) -> None:
        """Refuse a collision section (CollisionSpec) whose contacts are not the sweep's:
        another self-collision setting or other obstacles (a basis of a finger against a
        plane has no rows where it touches itself).

        Raises:
            BasisFileError: another collision model (one line).
        """
        if self.collision_model and self.collision_model != collision_model_of(spec):
            raise BasisFileError(
                f"{where}: the basis was built with another collision model ({self.collision_model}) than "
                f"this description's ({collision_model_of(spec)}): rebuild it with soft-inverse-ros reduce-contacts")


def collision_model_of(spec) -> str:
    """What can touch under a collision section (CollisionSpec), as a basis file records it:
    self-collision on or off and the obstacles (kind, parameters, motion), numbers written
    as plain decimals (the same text whatever numpy prints for its scalars)."""
    import dataclasses

    def plain(value) -> str:
        if isinstance(value, Path):  # a mesh obstacle's file: its name (the folder is the machine's)
            return value.name
        if isinstance(value, str):
            return value
        array = np.asarray(value) if isinstance(value, (int, float, tuple, list, np.ndarray, np.generic)) else None
        if array is not None and array.dtype.kind in "biuf" and array.size <= 16:
            numbers = [f"{float(v):.9g}" for v in array.reshape(-1)]
            return numbers[0] if array.ndim == 0 else "(" + ", ".join(numbers) + ")"
        return type(value).__name__  # a loaded geometry: the file it came from is a parameter too

    def obstacle(o) -> str:
        params = ", ".join(f"{name}={plain(value)}" for name, value in o.params)
        motion = "" if o.motion is None else " moving " + ", ".join(
            f"{f.name}={plain(getattr(o.motion, f.name))}" for f in dataclasses.fields(o.motion))
        return f"{o.kind}({params}){motion}"

    obstacles = "; ".join(obstacle(o) for o in spec.obstacles) or "none"
    return f"self_collision={bool(spec.self_collision)}, obstacles: {obstacles}"


def save_basis(path: str | Path, data: BasisFile) -> Path:
    """Write ``data`` to ``path`` (``.npz`` added if missing); returns the path written."""
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    ks = np.array(sorted(data.error_vs_k), dtype=np.int64)
    entries = dict(
        nodes=np.asarray(data.nodes, np.int64), psi=np.asarray(data.psi, float), robot=np.str_(data.robot),
        mesh_nodes=np.int64(data.mesh_nodes), rest_checksum=np.str_(data.rest_checksum),
        sweep=np.array(data.sweep, dtype=np.str_), nnmf=np.str_(data.nnmf), snapshots=np.int64(data.snapshots),
        error_k=ks, error=np.array([data.error_vs_k[int(k)] for k in ks], dtype=float),
        simulator=np.str_(data.simulator), hold=np.int64(data.hold), collision_model=np.str_(data.collision_model))
    entries = {key: np.asarray(value) for key, value in entries.items()}
    with path.open("wb") as f:
        np.savez(f, format=np.str_(FORMAT), version=np.int64(VERSION),
                 contents_sha256=np.str_(entries_digest(entries, _DIGESTED)), **entries)
    return path


def load_basis(path: str | Path) -> BasisFile:
    """Read a basis file.

    Raises:
        BasisFileError: missing or unreadable file, not a basis file, another format
            version, or inconsistent arrays (one line naming the file).
    """
    path = Path(path)
    if path.is_dir():
        raise BasisFileError(f"contact basis {path} is a directory, not a file")
    if not path.is_file():
        raise BasisFileError(f"contact basis {path} not found (build one with soft-inverse-ros reduce-contacts)")
    raw = read_npz(path, "contact basis", "build one with soft-inverse-ros reduce-contacts", BasisFileError)
    return _basis_from_entries(path, raw)


def _basis_from_entries(path: Path, raw: dict) -> BasisFile:
    """The BasisFile of a file's entries, each checked for the kind, shape and range the
    writer gives it (module docstring)."""
    def bad(what: str) -> BasisFileError:
        return BasisFileError(f"contact basis {path}: {what} (a damaged or edited file; rebuild it with "
                              "soft-inverse-ros reduce-contacts)")

    def scalar(key: str, kinds: str):
        value = raw[key]
        if value.ndim != 0 or value.dtype.kind not in kinds:
            raise bad(f"its {key} entry is {value.dtype} of shape {value.shape}, not a single "
                      f"{'string' if kinds == 'U' else 'integer'}")
        return value.item()

    fmt = raw.get("format")
    if fmt is None or fmt.ndim != 0 or fmt.dtype.kind != "U" or str(fmt) != FORMAT:
        shown = "missing" if fmt is None else repr(fmt.tolist())
        raise BasisFileError(f"contact basis {path}: not a contact basis file (format entry {shown}, "
                             f"expected {FORMAT!r})")
    missing = [key for key in _KEYS if key not in raw]
    if missing:
        raise BasisFileError(f"contact basis {path}: not a contact basis file (missing {missing})")
    version = scalar("version", "iu")
    if version != VERSION:
        raise BasisFileError(f"contact basis {path}: format version {version}, expected {VERSION}")
    robot, checksum, nnmf, simulator = (scalar(k, "U") for k in ("robot", "rest_checksum", "nnmf", "simulator"))
    mesh_nodes, snapshots, hold = (scalar(k, "iu") for k in ("mesh_nodes", "snapshots", "hold"))
    if simulator not in ("plant", "model"):
        raise bad(f"its simulator is {simulator!r}, not 'plant' or 'model'")
    if nnmf not in ("hals", "als"):
        raise bad(f"its nnmf is {nnmf!r}, not 'hals' or 'als'")
    if mesh_nodes < 1 or snapshots < 1 or hold < 0:
        raise bad(f"mesh_nodes {mesh_nodes}, snapshots {snapshots}, hold {hold}")
    sweep = raw["sweep"]
    if sweep.ndim > 1 or sweep.dtype.kind != "U":
        raise bad("its sweep entry is not a list of strings")
    nodes, psi = raw["nodes"], raw["psi"]
    if nodes.ndim != 1 or nodes.dtype.kind not in "iu":
        raise bad(f"its nodes are {nodes.dtype} of shape {nodes.shape}, not a list of node ids")
    if nodes.size and (nodes.min() < 0 or nodes.max() >= mesh_nodes or np.unique(nodes).size != nodes.size):
        raise bad(f"its nodes are not distinct ids of the mesh's {mesh_nodes} nodes")
    if psi.ndim != 2 or psi.dtype.kind != "f" or psi.shape != (nodes.size, psi.shape[1]) or psi.shape[1] < 1:
        raise bad(f"its psi is {psi.dtype} of shape {psi.shape}, not ({nodes.size}, k >= 1) real numbers")
    if not (np.isfinite(psi).all() and (psi >= 0).all()):
        raise bad("its psi is not finite and >= 0")
    norms = np.linalg.norm(psi, axis=0)
    unit = np.abs(norms - 1.0) <= _UNIT_TOLERANCE
    if not (np.all(unit | (norms == 0.0)) and unit.any()):
        raise bad(f"its psi's columns are not unit vectors (norms {np.round(norms, 6).tolist()})")
    error_k, error = raw["error_k"], raw["error"]
    if (error_k.ndim != 1 or error_k.dtype.kind not in "iu" or error.ndim != 1 or error.dtype.kind != "f"
            or error_k.shape != error.shape):
        raise bad("its error_k and error are not two lists of the same length")
    if not (np.isfinite(error).all() and (error >= 0).all() and (error_k >= 1).all()):
        raise bad("its error curve is not finite and >= 0")
    collision_model = ""
    if "collision_model" in raw:
        collision_model = scalar("collision_model", "U")
    if "contents_sha256" in raw:  # files written before the checksum have none
        complete = {key: raw.get(key, np.asarray(np.str_(""))) for key in _DIGESTED}
        if scalar("contents_sha256", "U") != entries_digest(complete, _DIGESTED):
            raise bad("its entries do not match the checksum written with them")
    return BasisFile(
        nodes=np.asarray(nodes, np.int64), psi=np.asarray(psi, float), robot=robot, mesh_nodes=mesh_nodes,
        rest_checksum=checksum, sweep=tuple(str(v) for v in np.atleast_1d(sweep)), nnmf=nnmf,
        snapshots=snapshots, error_vs_k={int(k): float(e) for k, e in zip(error_k, error)},
        simulator=simulator, hold=hold, collision_model=collision_model)
