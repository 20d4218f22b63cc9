"""Mocap → robot frame registration: least-squares rigid fit of paired points.

Given the same physical points measured in the mocap frame (``m_i``) and known in the
robot frame (``r_i``, REP-103, metres), :func:`estimate_rigid_transform` finds the proper
rotation R and translation t minimizing Σ w_i |R m_i + t − r_i|² (Kabsch/Umeyama without
scale). The mocap unit is fixed by the user (``mocap_unit_scale``, e.g. 1e-3 for mm),
never estimated, so a wrong unit shows up as a large residual instead of being absorbed.

The result is saved as a ``mocap_registration`` block in YAML (a file of its own or a
robot configuration); :func:`load_registration` reads it back and the mocap pipeline
applies it as ``p_robot = R (s p_mocap) + t``.
"""

from __future__ import annotations

import csv
import datetime as _dt
import os
import pathlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from soft_inverse_ros.core.csv_files import data_lines
from soft_inverse_ros.core.mocap.rigid_transform import RigidTransform
from soft_inverse_ros.core.yaml_files import load_yaml

#: Top-level YAML key holding the registration.
REGISTRATION_KEY = "mocap_registration"
#: Points whose second principal extent is below this fraction of the first are collinear.
COLLINEAR_RATIO = 1e-3


class RegistrationError(ValueError):
    """Paired points cannot determine a rigid transform (too few, collinear, non-finite)."""


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class FrameRegistration:
    """The mocap → robot transform and how well it fits its calibration points.

    Attributes:
        transform: ``p_robot = transform.apply_points(mocap_unit_scale * p_mocap)``.
        mocap_unit_scale: Mocap unit → metres (1.0 for m, 1e-3 for mm).
        parent_frame: Robot frame name (REP-103 base frame, e.g. ``base_link``).
        child_frame: Mocap frame name.
        residual_rms: RMS of |R m_i + t − r_i| over the calibration points [m].
        residual_max: Largest residual [m].
        n_points: Number of calibration pairs used.
    """

    transform: RigidTransform
    mocap_unit_scale: float = 1.0
    parent_frame: str = "base_link"
    child_frame: str = "mocap"
    residual_rms: float = float("nan")
    residual_max: float = float("nan")
    n_points: int = 0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.mocap_unit_scale) and self.mocap_unit_scale > 0):
            raise ValueError(
                f"mocap_unit_scale must be a positive number, got {self.mocap_unit_scale!r}"
            )

    @classmethod
    def identity(cls, parent_frame: str = "base_link", mocap_unit_scale: float = 1.0):
        """No registration: mocap frame = robot frame (useful for simulation)."""
        return cls(RigidTransform.identity(), mocap_unit_scale, parent_frame, "mocap", 0.0, 0.0)

    @property
    def is_calibrated(self) -> bool:
        """True when fitted from at least 3 pairs (``n_points: 0`` marks a placeholder
        identity, e.g. an uncalibrated example configuration)."""
        return self.n_points >= 3

    def to_robot(self, points_mocap: np.ndarray) -> np.ndarray:
        """Mocap points (..., 3) in mocap units → robot frame [m]."""
        return self.transform.apply_points(self.mocap_unit_scale * np.asarray(points_mocap))

    def to_mocap(self, points_robot: np.ndarray) -> np.ndarray:
        """Robot-frame points (..., 3) [m] → mocap frame, in mocap units."""
        return self.transform.inverse().apply_points(points_robot) / self.mocap_unit_scale

    def to_dict(self) -> dict:
        """Plain-YAML form (the value of the ``mocap_registration`` key)."""
        return {
            "parent_frame": self.parent_frame,
            "child_frame": self.child_frame,
            "translation": [float(v) for v in self.transform.translation],
            "rotation_xyzw": [float(v) for v in self.transform.quaternion],
            "mocap_unit_scale": float(self.mocap_unit_scale),
            "residual_rms": float(self.residual_rms),
            "residual_max": float(self.residual_max),
            "n_points": int(self.n_points),
        }

    @classmethod
    def from_dict(cls, data: dict, where: str = REGISTRATION_KEY) -> "FrameRegistration":
        """Parse the ``mocap_registration`` block; errors name the offending key."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a mapping, got {type(data).__name__}")
        known = {
            "parent_frame", "child_frame", "translation", "rotation_xyzw", "mocap_unit_scale",
            "residual_rms", "residual_max", "n_points", "created",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown} (expected some of {sorted(known)})")
        for key in ("translation", "rotation_xyzw"):
            if key not in data:
                raise ValueError(f"{where}.{key} is missing")
        t = _float_vector(data["translation"], 3, f"{where}.translation")
        q = _float_vector(data["rotation_xyzw"], 4, f"{where}.rotation_xyzw")
        if abs(np.linalg.norm(q) - 1.0) > 1e-3:
            raise ValueError(f"{where}.rotation_xyzw is not a unit quaternion (norm {np.linalg.norm(q):.6g})")
        try:
            scale = float(data.get("mocap_unit_scale", 1.0))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}.mocap_unit_scale must be a number") from exc
        return cls(
            transform=RigidTransform.from_quaternion(q, t),
            mocap_unit_scale=scale,
            parent_frame=str(data.get("parent_frame", "base_link")),
            child_frame=str(data.get("child_frame", "mocap")),
            residual_rms=float(data.get("residual_rms", float("nan"))),
            residual_max=float(data.get("residual_max", float("nan"))),
            n_points=int(data.get("n_points", 0)),
        )


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class RegistrationResult:
    """Outcome of a rigid fit.

    Attributes:
        registration: The fitted transform with its residual figures.
        residuals: (n,) per-pair distance |R m_i + t − r_i| [m].
    """

    registration: FrameRegistration
    residuals: np.ndarray

    @property
    def transform(self) -> RigidTransform:
        return self.registration.transform

    @property
    def residual_rms(self) -> float:
        return self.registration.residual_rms

    @property
    def residual_max(self) -> float:
        return self.registration.residual_max


def _float_vector(value, n: int, where: str) -> np.ndarray:
    try:
        v = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} must be a list of {n} numbers") from exc
    if v.shape != (n,) or not np.all(np.isfinite(v)):
        raise ValueError(f"{where} must be a list of {n} finite numbers, got {value!r}")
    return v


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class RigidFits:
    """Least-squares rigid transforms of a batch of point sets (:func:`fit_rigid_transforms`).

    Attributes:
        rotations: (B, 3, 3) proper rotations, ``target ≈ R source + t``.
        translations: (B, 3) translations, in the target's units.
        source_extents, target_extents: (B, 3) principal extents (singular values of the
            weighted, centred points), largest first.
        valid: (B,) True where both sets span a plane (:data:`COLLINEAR_RATIO`); the
            rotation of an invalid set is not determined (its entry is still finite).
    """

    rotations: np.ndarray
    translations: np.ndarray
    source_extents: np.ndarray
    target_extents: np.ndarray
    valid: np.ndarray


def _spread(extents: np.ndarray) -> np.ndarray:
    """True where principal extents (…, 3) are not those of collinear or coincident points."""
    return (extents[..., 0] > 0) & (extents[..., 1] >= COLLINEAR_RATIO * extents[..., 0])


def fit_rigid_transforms(source: np.ndarray, target: np.ndarray,
                         weights: np.ndarray) -> RigidFits:
    """Kabsch fits of B paired point sets at once: minimize Σ_i w_i |R s_i + t − d_i|².

    Args:
        source: (B, n, 3) points to map.
        target: (B, n, 3) the same points where they should land.
        weights: (B, n) non-negative weights; a point with weight 0 is ignored, and may be
            NaN (an occluded marker). Each set needs a positive total weight.

    No validation beyond :attr:`RigidFits.valid`: callers check their inputs
    (:func:`estimate_rigid_transform` does for one set).
    """
    w = np.asarray(weights, dtype=float)
    used = w > 0
    s = np.where(used[..., None], source, 0.0)
    d = np.where(used[..., None], target, 0.0)
    w_sum = w.sum(axis=-1)
    s_mean = np.einsum("bi,bij->bj", w, s) / w_sum[:, None]
    d_mean = np.einsum("bi,bij->bj", w, d) / w_sum[:, None]
    sc = np.where(used[..., None], s - s_mean[:, None], 0.0)
    dc = np.where(used[..., None], d - d_mean[:, None], 0.0)
    root_w = np.sqrt(w)[..., None]
    source_extents = np.linalg.svd(root_w * sc, compute_uv=False)
    target_extents = np.linalg.svd(root_w * dc, compute_uv=False)
    h = np.einsum("bi,bij,bik->bjk", w, sc, dc)  # Σ w s_c d_cᵀ
    u, _, vt = np.linalg.svd(h)
    v = np.swapaxes(vt, -1, -2)
    ut = np.swapaxes(u, -1, -2)
    det = np.linalg.det(v @ ut)
    v[..., 2] *= np.where(det < 0, -1.0, 1.0)[:, None]  # a proper rotation, not a reflection
    rotations = v @ ut
    translations = d_mean - np.einsum("bjk,bk->bj", rotations, s_mean)
    valid = _spread(source_extents) & _spread(target_extents)
    return RigidFits(rotations, translations, source_extents, target_extents, valid)


def estimate_rigid_transform(
    mocap_points: np.ndarray,
    robot_points: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    mocap_unit_scale: float = 1.0,
    parent_frame: str = "base_link",
    child_frame: str = "mocap",
) -> RegistrationResult:
    """Least-squares proper rigid transform robot ← mocap from paired points.

    Args:
        mocap_points: (n, 3) points in the mocap frame, mocap units.
        robot_points: (n, 3) the same points in the robot frame [m].
        weights: Optional (n,) non-negative weights (default all 1).
        mocap_unit_scale: Mocap unit → metres, applied to ``mocap_points`` before fitting.

    Returns:
        The transform with per-pair residuals, their RMS (weighted) and max [m].

    Raises:
        RegistrationError: fewer than 3 pairs, shapes differ, non-finite values, or the
            points are (nearly) collinear so the rotation about their line is undetermined.
    """
    m = np.asarray(mocap_points, dtype=float)
    r = np.asarray(robot_points, dtype=float)
    if m.ndim != 2 or m.shape[1] != 3 or r.shape != m.shape:
        raise RegistrationError(
            f"need two (n, 3) arrays of paired points, got {m.shape} and {r.shape}"
        )
    n = m.shape[0]
    if n < 3:
        raise RegistrationError(f"need at least 3 non-collinear point pairs, got {n}")
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(r))):
        raise RegistrationError("paired points contain NaN or infinite values")
    if not (np.isfinite(mocap_unit_scale) and mocap_unit_scale > 0):
        raise RegistrationError(f"mocap_unit_scale must be positive, got {mocap_unit_scale!r}")
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float).reshape(-1)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise RegistrationError("weights must be n finite non-negative numbers")
    if np.count_nonzero(w) < 3:
        raise RegistrationError("need at least 3 point pairs with non-zero weight")
    m = m * mocap_unit_scale

    fit = fit_rigid_transforms(m[None], r[None], w[None])
    for name, sv in (("mocap", fit.source_extents[0]), ("robot", fit.target_extents[0])):
        if not _spread(sv):
            raise RegistrationError(
                f"{name} points are collinear or coincident (principal extents {sv.tolist()}); "
                "need at least 3 non-collinear points"
            )
    w_sum = w.sum()
    transform = RigidTransform(fit.rotations[0], fit.translations[0])
    residuals = np.linalg.norm(transform.apply_points(m) - r, axis=1)
    rms = float(np.sqrt(w @ residuals**2 / w_sum))
    registration = FrameRegistration(
        transform=transform,
        mocap_unit_scale=mocap_unit_scale,
        parent_frame=parent_frame,
        child_frame=child_frame,
        residual_rms=rms,
        residual_max=float(residuals.max()),
        n_points=int(np.count_nonzero(w)),
    )
    return RegistrationResult(registration, residuals)


#: Column names of a point-pairs CSV.
PAIR_COLUMNS = ("mocap_x", "mocap_y", "mocap_z", "robot_x", "robot_y", "robot_z")


def read_point_pairs(path: str | pathlib.Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read paired points from CSV.

    The header must name the columns ``mocap_x, mocap_y, mocap_z, robot_x, robot_y,
    robot_z`` (any order; extra columns such as ``name`` are ignored; an optional
    ``weight`` column gives weights). Lines starting with ``#`` are comments; a UTF-8
    byte-order mark (a CSV saved by Excel) is ignored.

    Returns:
        ``(mocap_points (n, 3), robot_points (n, 3), weights (n,))``.
    """
    path = pathlib.Path(path)
    reader = csv.DictReader(data_lines(path))
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:  # csv keeps the last of them: a silently wrong column
        raise RegistrationError(f"{path}: columns {twice} appear more than once in the header")
    missing = [c for c in PAIR_COLUMNS if c not in header]
    if missing:
        raise RegistrationError(f"{path}: missing columns {missing} (header: {header})")
    values = []
    weights = []
    for line_no, row in enumerate(reader, start=2):
        if None in row:  # more fields than the header names
            raise RegistrationError(f"{path}: data row {line_no - 1} has {len(header) + len(row[None])} fields, "
                                    f"the header names {len(header)}")
        try:
            values.append([float(row[c]) for c in PAIR_COLUMNS])
            weights.append(float(row["weight"]) if "weight" in header else 1.0)
        except (TypeError, ValueError) as exc:
            raise RegistrationError(f"{path}: data row {line_no - 1} is not numeric: {row}") from exc
    if not values:
        raise RegistrationError(f"{path}: no point pairs")
    a = np.asarray(values)
    return a[:, :3], a[:, 3:], np.asarray(weights)


def _replace_top_level_block(text: str, key: str, block_yaml: str) -> str:
    """``text`` with its top-level ``key:`` block replaced by ``block_yaml`` (appended when
    absent); every other line, comments included, is kept as it is."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.startswith(f"{key}:")), None)
    if start is None:
        sep = "" if not text or text.endswith("\n") else "\n"
        return text + sep + block_yaml
    end = start + 1
    while end < len(lines):
        ln = lines[end]
        if ln.strip() and not ln[0].isspace() and not ln.startswith("#"):
            break  # next top-level key
        end += 1
    # Keep comment lines that directly precede the next key (they belong to it).
    while end - 1 > start and lines[end - 1].startswith("#"):
        end -= 1
    return "".join(lines[:start]) + block_yaml + "".join(lines[end:])


def _shadowing_entry(config: dict, path: pathlib.Path) -> str:
    """Why the top-level block of ``config`` (the mapping in ``path``) would be ignored ("" when
    it would not): the mocap loader takes ``mocap.registration`` first, when present."""
    mocap = config.get("mocap")
    if not isinstance(mocap, dict) or mocap.get("registration") is None:
        return ""
    entry = mocap["registration"]
    where = f"the file it names ({entry})" if isinstance(entry, str) else "that inline block"
    return (f"{path}: its mocap.registration entry takes precedence over the top-level {REGISTRATION_KEY} "
            f"block written here, which the loader would ignore: update {where} instead, or remove the entry")


def _replace_checked(path: pathlib.Path, text: str, check: Callable[[pathlib.Path], None] | None) -> None:
    """Replace ``path``'s content by ``text``; with ``check``, only once ``check`` accepted a
    copy next to it (same folder: its relative paths resolve alike); its error propagates
    and ``path`` is left as it was."""
    if check is None:
        path.write_text(text)
        return
    draft = path.with_name(f".{path.name}.register-frames")
    draft.write_text(text)
    try:
        check(draft)
        os.replace(draft, path)
    finally:
        draft.unlink(missing_ok=True)


def save_registration(
    registration: FrameRegistration, path: str | pathlib.Path, *, update: bool = False,
    check: Callable[[pathlib.Path], None] | None = None,
) -> pathlib.Path:
    """Write the ``mocap_registration`` block to YAML.

    With ``update=True`` the file must exist and hold a mapping (e.g. a mocap or robot
    configuration): only its top-level ``mocap_registration`` block is replaced (or
    appended), the rest of the text, comments included, is kept. A file whose
    ``mocap.registration`` entry would shadow that block is refused (ValueError). ``check``
    (e.g. loading it with the configuration's loader) is called on the updated text, in a
    file next to ``path``, before ``path`` is replaced; what it raises leaves ``path`` as it was.
    """
    import yaml

    path = pathlib.Path(path)
    block = registration.to_dict()
    block["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    block_yaml = yaml.safe_dump(
        {REGISTRATION_KEY: block}, sort_keys=False, default_flow_style=None
    )
    if update:
        if not path.is_file():
            raise FileNotFoundError(f"configuration to update not found: {path}")
        text = path.read_text()
        before = yaml.safe_load(text) or {}
        if not isinstance(before, dict):
            raise ValueError(f"{path} does not hold a YAML mapping; cannot add {REGISTRATION_KEY}")
        shadowed = _shadowing_entry(before, path)
        if shadowed:
            raise ValueError(shadowed)
        new_text = _replace_top_level_block(text, REGISTRATION_KEY, block_yaml)
        after = yaml.safe_load(new_text)
        before.pop(REGISTRATION_KEY, None)
        after_rest = {k: v for k, v in after.items() if k != REGISTRATION_KEY}
        if after_rest != before or REGISTRATION_KEY not in after:
            raise ValueError(
                f"{path}: could not replace the {REGISTRATION_KEY} block without touching "
                "other keys (is it written in flow style?); edit the file by hand"
            )
        _replace_checked(path, new_text, check)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block_yaml)
    return path


def load_registration(path: str | pathlib.Path) -> FrameRegistration:
    """Read the ``mocap_registration`` block of a YAML file (its own file or a robot config)."""
    path = pathlib.Path(path)
    data = load_yaml(path.read_text())
    if not isinstance(data, dict) or REGISTRATION_KEY not in data:
        raise ValueError(f"{path} has no top-level {REGISTRATION_KEY!r} key")
    return FrameRegistration.from_dict(data[REGISTRATION_KEY], where=f"{path}:{REGISTRATION_KEY}")
