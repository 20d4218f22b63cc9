"""A reduced-order model of the controller's FEM: the low-rate update on large meshes.

The full model (:class:`~soft_inverse_ros.core.model.robot_model.RobotModel`) solves with
the mesh's tangent stiffness at every update, and on a 50k-node mesh one solve with its
factor takes most of a second. Model-order reduction, as in Goury & Duriez (IEEE T-RO
2018; SOFA's ModelOrderReduction plugin), restricts the motion to a small subspace::

    x = x_ref + Φ q,      Φ (n_free, r) with orthonormal columns,

x_ref the equilibrium under gravity with zero efforts. The quasi-static equilibrium is then
the Galerkin projection ``Φᵀ r(x_ref + Φ q) = 0`` (r: the full model's residual f_int +
f_ext + J_aᵀ λ), solved by Newton iterations on the r × r tangent ``K_r = Φᵀ K(x) Φ``, and
the compliance is the Galerkin compliance

    W = (Φᵀ Jᵀ)ᵀ K_r⁻¹ (Φᵀ Jᵀ),

which equals the full model's J K⁻¹ Jᵀ whenever the full solution K⁻¹ Jᵀ lies in span(Φ),
and otherwise errs by the energy of its distance to the span (second order in it).

The basis (:func:`build_model_reduction`) is trained on the full model itself: equilibria
under efforts sampled over the actuators' whole effort ranges (a seeded Latin hypercube),
and at each of them the solved compliance columns K⁻¹ [J_aᵀ J_eᵀ]; an effort vector under
which the full model finds no equilibrium, or one with a stroke beyond its limits, is
halved towards zero (:func:`equilibrium_within_limits`). Φ spans the rest shape (so
:meth:`ReducedRobotModel.reset` is exact) and the proper orthogonal decomposition (POD),
in the energy norm of K(x_ref), of the displacements and of the columns (those at x_ref
included), each scaled to unit energy: every snapshot keeps all but ``mode_tolerance`` of
its energy in the span (:func:`_energy_pod`). The evaluation trajectories of ``bench fem`` and ``reduce-model``'s own check are not among the
training states.

Optionally the elastic forces and tangent come from a weighted sample of the elements (ECSW,
:mod:`soft_inverse_ros.core.sim.hyper_reduction`, trained on the same equilibria), which
makes an update's cost independent of the mesh size but adds the sample's error to W.

What the reduction does not model: contact (a model with a collision section is refused),
and motion outside the trained span (efforts beyond the sampled ranges).

Units SI, the robot's base frame (REP-103): positions [m], efforts [N] or [Pa], strokes [m]
or [m³], reduced coordinates q [m] (Φ is dimensionless).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.linalg as la

from soft_inverse_ros.core.model.compliance import ComplianceMatrices, compliance_from_columns, make_snapshot
from soft_inverse_ros.core.model.kernel_choice import compiled_module
from soft_inverse_ros.core.model.linear_solvers import ConvergenceError
from soft_inverse_ros.core.model.robot_model import QuasiStaticModelState, StepInfo
from soft_inverse_ros.core.npz_files import entries_digest, read_npz

__all__ = [
    "ModelReduction",
    "ReducedRobotModel",
    "ReductionError",
    "build_model_reduction",
    "check_reduction_fits",
    "load_model_reduction",
    "model_fingerprint",
]

#: file format of a saved reduction (``format`` entry)
REDUCTION_FORMAT = 1
#: training defaults (``reduce-model`` and ``bench fem --reduced``)
DEFAULT_SAMPLES = 24
DEFAULT_SEED = 20181101  # Goury & Duriez, T-RO 2018
#: energy POD: each training snapshot keeps all but this fraction of its energy in the span.
#: 3e-6 from the 50k-node box's held-out checks (another seed than the training's): W within
#: 2.4e-7 there, where 1e-5 left one check at 1.1e-6 (BENCHMARKS.md, thirtieth session)
DEFAULT_MODE_TOLERANCE = 3e-6
DEFAULT_MAX_MODES = 120
#: a training sample beyond the model's reach is halved towards zero at most this often
_HALVINGS = 5
#: Newton iterations of a reduced equilibrium
_MAX_ITERATIONS = 100
#: node rows per chunk of the compiled tangent projection (:meth:`ReducedRobotModel._tangent`)
_CHUNK_BLOCKS = 768
#: largest |ΦᵀΦ − I| of a basis read from a file (a trained one is orthonormal to round-off)
_ORTHONORMAL_TOLERANCE = 1e-8
#: the entries a file's ``contents_sha256`` covers
_DIGESTED = ("reference_positions", "basis", "fingerprint", "robot", "hyper_elements",
             "hyper_weights", "hyper_offset", "trained_effort_range", "trained_stroke_range")


class ReductionError(ValueError):
    """A reduction that cannot be built, loaded or used with this model (one clear line)."""


def model_fingerprint(model) -> str:
    """SHA-256 of what a reduction depends on: the mesh, the clamped nodes, the material, the
    gravity and the actuators' and effectors' names, kinds and mapped points at rest."""
    fem = model.fem
    h = hashlib.sha256()
    for array in (fem.rest_points, fem.tets, fem.fixed_mask, np.asarray(model.description.gravity, float),
                  np.array([fem.young_modulus, fem.poisson_ratio, float(fem.density or 0.0)]),
                  model.actuators.points(fem.rest_points), model.effectors.points(fem.rest_points)):
        a = np.ascontiguousarray(array)
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    h.update(repr((model.actuator_names, [int(k) for k in model.actuator_kinds],
                   model.effector_names)).encode())
    return h.hexdigest()


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class ModelReduction:
    """A trained reduced basis for one robot model (see the module docstring).

    Attributes:
        reference_positions: x_ref (N, 3) [m], the equilibrium under gravity, zero efforts.
        basis: Φ (n_free, r), orthonormal columns.
        fingerprint: :func:`model_fingerprint` of the model it was trained on.
        robot: the robot's name (for messages).
        hyper_elements, hyper_weights, hyper_offset: the ECSW element sample (indices into
            the mesh's tets), its weights and the offset c (r,) [N] that makes the sampled
            forces exact at x_ref; empty arrays without hyper-reduction.
        trained_effort_range, trained_stroke_range: (2, n_a) the actuators' effort [N or Pa]
            and stroke [m or m³] limits the training sampled within (rows min, max); a model
            whose limits reach beyond them is refused (the basis does not span that motion).
            (2, 0) in files written before they were kept.
        training: what the training did (samples, modes, tolerances, times; scalars).
    """

    reference_positions: np.ndarray
    basis: np.ndarray
    fingerprint: str
    robot: str
    hyper_elements: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    hyper_weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    hyper_offset: np.ndarray = field(default_factory=lambda: np.zeros(0))
    trained_effort_range: np.ndarray = field(default_factory=lambda: np.zeros((2, 0)))
    trained_stroke_range: np.ndarray = field(default_factory=lambda: np.zeros((2, 0)))
    training: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        """r, the number of reduced coordinates."""
        return int(self.basis.shape[1])

    @property
    def hyper_reduced(self) -> bool:
        return self.hyper_elements.size > 0

    def save(self, path: str | Path) -> Path:
        """Write the reduction to ``path`` (.npz; the suffix is added when missing)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(path.suffix + ".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        scalars = {f"training_{k}": np.array(v) for k, v in self.training.items()}
        arrays = dict(reference_positions=self.reference_positions, basis=self.basis,
                      fingerprint=np.array(self.fingerprint), robot=np.array(self.robot),
                      hyper_elements=self.hyper_elements, hyper_weights=self.hyper_weights,
                      hyper_offset=self.hyper_offset, trained_effort_range=self.trained_effort_range,
                      trained_stroke_range=self.trained_stroke_range)
        arrays = {k: np.asarray(v) for k, v in arrays.items()}
        np.savez(path, format=np.array(REDUCTION_FORMAT),
                 contents_sha256=np.array(entries_digest(arrays, _DIGESTED)),
                 **arrays, **scalars)
        return path


def _checked_arrays(path: Path, arrays: dict) -> None:
    """Refuse (ReductionError, one line) entries no training writes: wrong kinds or shapes,
    non-finite values, a basis that is not orthonormal, a changed digest."""
    def bad(what: str) -> ReductionError:
        return ReductionError(f"{path}: {what}: a damaged or edited file; rebuild it with "
                              "`soft-inverse-ros reduce-model`")

    fmt = arrays["format"]
    if fmt.ndim != 0 or fmt.dtype.kind not in "iu":
        raise bad(f"its format entry is {fmt.dtype} of shape {fmt.shape}, not an integer")
    if int(fmt) != REDUCTION_FORMAT:
        raise ReductionError(f"{path}: reduction format {int(fmt)}, this version reads "
                             f"{REDUCTION_FORMAT}; rebuild it with `soft-inverse-ros reduce-model`")
    for key in ("fingerprint", "robot"):
        if arrays[key].ndim != 0 or arrays[key].dtype.kind != "U":
            raise bad(f"its {key} entry is not a string")
    basis, x_ref = arrays["basis"], arrays["reference_positions"]
    if basis.ndim != 2 or basis.dtype.kind != "f" or basis.shape[1] < 1:
        raise bad(f"its basis is {basis.dtype} of shape {basis.shape}, not (DOFs, r >= 1) floats")
    if x_ref.ndim != 2 or x_ref.shape[1:] != (3,) or x_ref.dtype.kind != "f":
        raise bad(f"its reference positions are of shape {x_ref.shape}, not (N, 3)")
    if not (np.all(np.isfinite(basis)) and np.all(np.isfinite(x_ref))):
        raise bad("its basis or reference positions are not finite")
    elements = arrays.get("hyper_elements", np.zeros(0, np.int64))
    weights = arrays.get("hyper_weights", np.zeros(0))
    offset = arrays.get("hyper_offset", np.zeros(0))
    if elements.ndim != 1 or (elements.size and elements.dtype.kind not in "iu"):
        raise bad("its element sample is not a list of element indices")
    if weights.shape != elements.shape or offset.shape != ((basis.shape[1],) if elements.size else (0,)):
        raise bad(f"its element sample has {elements.size} elements, {weights.size} weights and "
                  f"an offset of shape {offset.shape} (r = {basis.shape[1]})")
    if not (np.all(np.isfinite(weights)) and np.all(weights >= 0) and np.all(np.isfinite(offset))):
        raise bad("its element weights are not finite and non-negative")
    ranges = [arrays.get(k, np.zeros((2, 0))) for k in ("trained_effort_range", "trained_stroke_range")]
    if any(r.ndim != 2 or r.shape[0] != 2 or r.dtype.kind != "f" for r in ranges) or ranges[0].shape != ranges[1].shape:
        raise bad("its trained actuator ranges are not (2, n_a) arrays")
    for key, value in arrays.items():
        if key.startswith("training_") and value.ndim != 0:
            raise bad(f"its {key} entry is not a scalar")
    gram = basis.T @ basis
    deviation = float(np.abs(gram - np.eye(gram.shape[0])).max())
    if not deviation <= _ORTHONORMAL_TOLERANCE:
        raise bad(f"its basis is not orthonormal (|ΦᵀΦ − I| = {deviation:.1e})")
    if "contents_sha256" in arrays:  # files written before the digest have none
        digest = arrays["contents_sha256"]
        complete = {k: arrays.get(k, np.zeros((2, 0))) for k in _DIGESTED}
        if digest.ndim != 0 or str(digest) != entries_digest(complete, _DIGESTED):
            raise bad("its arrays do not match the checksum written at training")


def check_reduction_fits(reduction: "ModelReduction", model, source: str = "the reduction") -> None:
    """Refuse (ReductionError, one line) a reduction that does not belong to ``model``: another
    :func:`model_fingerprint`, arrays of another mesh's size, element indices outside the mesh,
    or actuator limits reaching beyond the ranges the training sampled."""
    fem = model.fem
    if reduction.fingerprint != model_fingerprint(model):
        raise ReductionError(
            f"{source} was trained on robot {reduction.robot!r} with another mesh, material, "
            f"clamping or actuators than {model.description.name!r} has now; rebuild it with "
            "`soft-inverse-ros reduce-model`")
    if reduction.basis.shape[0] != fem.n_free or reduction.reference_positions.shape != (fem.n_nodes, 3):
        raise ReductionError(f"{source}'s arrays do not fit the model's mesh")
    elements = reduction.hyper_elements
    if elements.size and (elements.min() < 0 or elements.max() >= fem.n_elements
                          or np.unique(elements).size != elements.size):
        raise ReductionError(f"{source}'s element sample names elements outside the mesh's "
                             f"{fem.n_elements} (or one twice)")
    if reduction.trained_effort_range.shape[1] == 0:  # a file written before the ranges were kept
        return
    limits = model.actuator_limits()
    names = model.actuator_names
    if reduction.trained_effort_range.shape[1] != len(names):
        raise ReductionError(f"{source} was trained for {reduction.trained_effort_range.shape[1]} "
                             f"actuators, {model.description.name!r} has {len(names)}")
    for what, trained, now in (
            ("effort", reduction.trained_effort_range, (limits.effort_min, limits.effort_max)),
            ("stroke", reduction.trained_stroke_range, (limits.stroke_min, limits.stroke_max))):
        lo, hi = np.asarray(now[0], float), np.asarray(now[1], float)
        slack = 1e-9 * np.maximum(np.abs(trained), 1e-300)
        wider = (lo < trained[0] - slack[0]) | (hi > trained[1] + slack[1])
        if np.any(wider):
            i = int(np.flatnonzero(wider)[0])
            raise ReductionError(
                f"{source} was trained with {names[i]}'s {what} within [{trained[0, i]:g}, "
                f"{trained[1, i]:g}]; {model.description.name!r} now allows [{lo[i]:g}, {hi[i]:g}], "
                "motion the basis does not span: rebuild it with `soft-inverse-ros reduce-model`")


def load_model_reduction(path: str | Path, model=None) -> ModelReduction:
    """Read a reduction written by :meth:`ModelReduction.save`; with ``model``, check that it
    was trained on that model (same :func:`model_fingerprint`).

    Raises:
        ReductionError: unreadable file, another format, or another model.
    """
    path = Path(path)
    arrays = read_npz(path, "model reduction", "build one with `soft-inverse-ros reduce-model`", ReductionError)
    missing = {"format", "reference_positions", "basis", "fingerprint", "robot"} - set(arrays)
    if missing:
        raise ReductionError(f"{path} is not a model reduction (missing {sorted(missing)}); "
                             "build one with `soft-inverse-ros reduce-model`")
    _checked_arrays(path, arrays)
    reduction = ModelReduction(
        reference_positions=np.asarray(arrays["reference_positions"], float),
        basis=np.asarray(arrays["basis"], float),
        fingerprint=str(arrays["fingerprint"]), robot=str(arrays["robot"]),
        hyper_elements=np.asarray(arrays.get("hyper_elements", np.zeros(0)), np.int64),
        hyper_weights=np.asarray(arrays.get("hyper_weights", np.zeros(0)), float),
        hyper_offset=np.asarray(arrays.get("hyper_offset", np.zeros(0)), float),
        trained_effort_range=np.asarray(arrays.get("trained_effort_range", np.zeros((2, 0))), float),
        trained_stroke_range=np.asarray(arrays.get("trained_stroke_range", np.zeros((2, 0))), float),
        training={k[len("training_"):]: v.item() for k, v in arrays.items() if k.startswith("training_")},
    )
    if model is not None:
        check_reduction_fits(reduction, model, str(path))
    return reduction


# ---------------------------------------------------------------------------- training
def training_efforts(limits, samples: int, seed: int, names=None) -> np.ndarray:
    """``samples`` effort vectors (samples, n_a) over the actuators' effort ranges: a seeded
    Latin hypercube (each actuator's range cut into ``samples`` strata, one sample in each,
    strata paired at random across actuators).

    Raises:
        ReductionError: an actuator without a finite effort range.
    """
    lo, hi = np.asarray(limits.effort_min, float), np.asarray(limits.effort_max, float)
    names = names or limits.names or [f"#{i}" for i in range(lo.size)]
    bad = [name for name, a, b in zip(names, lo, hi) if not (np.isfinite(a) and np.isfinite(b))]
    if bad:
        raise ReductionError(f"actuators {bad} have no finite effort range to train the reduction "
                             "on: give them min/max efforts in the robot description")
    rng = np.random.default_rng(seed)
    n_a = lo.size
    strata = np.stack([rng.permutation(samples) for _ in range(n_a)], axis=1)
    u = (strata + rng.uniform(size=(samples, n_a))) / samples
    return lo + u * (hi - lo)


def equilibrium_within_limits(model, efforts: np.ndarray, limits, start: np.ndarray) -> np.ndarray | None:
    """Bring the full ``model`` from ``start`` (N, 3) [m] (zero efforts) to its equilibrium
    under ``efforts``, or, when it finds none or a stroke leaves its limits (a controller
    never drives the robot there), under efforts halved towards zero (clipped into the
    effort range) up to ``_HALVINGS`` times. Returns the efforts used, or None (the model
    is then back at ``start``)."""
    base = np.clip(0.0, limits.effort_min, limits.effort_max)
    zero = np.zeros(model.n_actuators)
    scale = 1.0
    for _ in range(_HALVINGS + 1):
        lam = base + scale * (np.asarray(efforts, float) - base)
        scale *= 0.5
        model.set_state(start, zero)
        try:
            model.equilibrate(lam)
        except ConvergenceError:
            continue
        strokes = model.actuator_stroke
        if np.all(strokes <= limits.stroke_max) and np.all(strokes >= limits.stroke_min):
            return lam
    model.set_state(start, zero)
    return None


def _energy_pod(snapshots: np.ndarray, stiffness, tolerance: float,
                max_modes: int) -> tuple[np.ndarray, np.ndarray]:
    """POD in the energy norm of ``stiffness`` (K_ref, SPD): the subspace of the fewest modes
    whose complement holds at most ``tolerance`` of the energy of every snapshot.

    The snapshots (n, s) are scaled to unit energy (sᵀ K s = 1); the method of snapshots
    diagonalizes their energy Gram matrix C = Sᵀ K S = V Λ Vᵀ, the modes are S V Λ^(-1/2)
    (K-orthonormal), and the modes are dropped from the smallest while the dropped
    eigenvalues sum to at most ``tolerance`` (each snapshot's energy outside the kept span
    is at most that sum). For a compliance column X = K⁻¹ Jᵀ the energy is W_jj, so its
    Galerkin W_jj errs by at most ``tolerance`` relative at the training state.

    Returns (modes (n, k) with orthonormal columns in the Euclidean norm, the eigenvalues).
    """
    if snapshots.shape[1] == 0:
        return np.zeros((snapshots.shape[0], 0)), np.zeros(0)
    ks = np.asarray(stiffness @ snapshots)
    energy = np.einsum("ij,ij->j", snapshots, ks)
    live = energy > 0
    scale = 1.0 / np.sqrt(energy[live])
    s, ks = snapshots[:, live] * scale, ks[:, live] * scale
    gram = s.T @ ks
    lam, v = np.linalg.eigh(0.5 * (gram + gram.T))
    lam, v = lam[::-1], v[:, ::-1]
    lam = np.maximum(lam, 0.0)
    dropped = np.cumsum(lam[::-1])[::-1]  # dropped[i]: energy of modes i, i+1, ...
    keep = int(np.count_nonzero(dropped > tolerance))
    keep = max(1, min(keep, max_modes, int(np.count_nonzero(lam > 0))))
    modes = s @ (v[:, :keep] / np.sqrt(lam[:keep]))
    return _orthonormal(modes), lam


def _orthonormal(vectors: np.ndarray, drop: float = 1e-10) -> np.ndarray:
    """Orthonormal basis of the columns (Householder QR with column pivoting), dropping
    directions below ``drop`` of the largest."""
    q, r, _ = la.qr(vectors, mode="economic", pivoting=True)
    d = np.abs(np.diag(r))
    if d.size == 0 or not d[0] > 0:
        return np.zeros((vectors.shape[0], 0))
    return np.ascontiguousarray(q[:, : int(np.count_nonzero(d > drop * d[0]))])


def build_model_reduction(
    model,
    *,
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    mode_tolerance: float = DEFAULT_MODE_TOLERANCE,
    max_modes: int = DEFAULT_MAX_MODES,
    hyper_tolerance: float = 0.0,
    progress: Callable[[str], None] | None = None,
) -> ModelReduction:
    """Train a reduction on the full ``model`` (a RobotModel without contact; its state is
    changed): equilibria under :func:`training_efforts` and their compliance columns
    (module docstring). ``hyper_tolerance`` > 0 also samples the elements (ECSW, relative
    training tolerance of the projected force changes).

    Raises:
        ReductionError: bad options, no finite effort ranges, or contact in the model.
        ConvergenceError: the full model found no equilibrium under gravity.
    """
    if getattr(model, "contact", None) is not None:
        raise ReductionError("the reduced model does not model contact: build it from the model "
                             "without its collision section")
    if not (isinstance(samples, int) and samples >= 1):
        raise ReductionError(f"samples must be an integer >= 1, got {samples!r}")
    if not (0.0 < mode_tolerance < 1.0):
        raise ReductionError(f"mode_tolerance must be in (0, 1), got {mode_tolerance!r}")
    if not (isinstance(max_modes, int) and max_modes >= 1):
        raise ReductionError(f"max_modes must be an integer >= 1, got {max_modes!r}")
    if not (math.isfinite(hyper_tolerance) and 0.0 <= hyper_tolerance < 1.0):
        raise ReductionError(f"hyper_tolerance must be in [0, 1), got {hyper_tolerance!r}")
    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    fem = model.fem
    limits = model.actuator_limits()
    efforts = training_efforts(limits, samples, seed, model.actuator_names)
    zero = np.zeros(model.n_actuators)
    model.equilibrate(zero, from_rest=True)
    x_ref = np.array(model.positions)
    columns = [model.compliance().columns]
    displacements = []
    configurations = []
    skipped = 0
    for i, lam in enumerate(efforts, 1):
        t_sample = time.perf_counter()
        used = equilibrium_within_limits(model, lam, limits, x_ref)
        if used is None:
            skipped += 1
            say(f"sample {i}/{samples}: no equilibrium within the stroke limits down to "
                f"{2.0 ** -_HALVINGS:g} of the efforts; skipped")
            continue
        x = np.array(model.positions)
        configurations.append(x)
        displacements.append(fem.reduce(x - x_ref))
        columns.append(model.compliance().columns)
        moved = float(np.abs(x - x_ref).max())
        say(f"sample {i}/{samples}: largest displacement {moved * 1e3:.2f} mm "
            f"({time.perf_counter() - t_sample:.1f} s)")
    if not displacements:
        raise ReductionError("no training sample reached an equilibrium")
    model.set_state(x_ref, zero)
    rest = fem.reduce(fem.rest_points - x_ref)[:, None]
    snapshots = np.hstack([np.column_stack(displacements)] + columns)
    k_ref = fem.stiffness(fem.element_state(x_ref))
    modes, energies = _energy_pod(snapshots, k_ref, mode_tolerance, max_modes)
    # the rest shape exactly in the span (reset), then the POD modes
    basis = _orthonormal(np.hstack((rest / max(float(np.linalg.norm(rest)), 1e-300), modes)))
    training = {
        "samples": samples, "samples_used": len(displacements), "samples_skipped": skipped,
        "seed": seed,
        "mode_tolerance": mode_tolerance, "max_modes": max_modes,
        "snapshots": snapshots.shape[1], "modes": basis.shape[1],
        "dropped_energy": float(energies[modes.shape[1]:].sum()),
        "hyper_tolerance": hyper_tolerance, "train_s": time.perf_counter() - t0,
    }
    say(f"basis: {basis.shape[1]} modes of {snapshots.shape[1]} snapshots (energy outside "
        f"the span at most {training['dropped_energy']:.1e} of any snapshot's)")
    hyper = {}
    if hyper_tolerance > 0:
        from soft_inverse_ros.core.sim.hyper_reduction import build_ecsw

        t_h = time.perf_counter()
        sample = build_ecsw(fem, basis, x_ref, configurations, hyper_tolerance)
        hyper = {"hyper_elements": sample.elements, "hyper_weights": sample.weights,
                 "hyper_offset": sample.offset}
        training.update(hyper_elements=len(sample.elements), hyper_fraction=sample.fraction,
                        hyper_training_error=sample.training_error, hyper_s=time.perf_counter() - t_h)
        say(f"element sample: {len(sample.elements)} of {fem.n_elements} elements "
            f"({100 * sample.fraction:.1f} %), training error {sample.training_error:.2e}")
    reduction = ModelReduction(
        x_ref, basis, model_fingerprint(model), model.description.name,
        trained_effort_range=np.vstack((limits.effort_min, limits.effort_max)).astype(float),
        trained_stroke_range=np.vstack((limits.stroke_min, limits.stroke_max)).astype(float),
        training=training, **hyper)
    if hyper_tolerance > 0:
        # a coarse sample can leave Φᵀ K Φ singular: refused here (the model's own check), not
        # in the node that loads the file
        ReducedRobotModel(model, reduction)
    training["build_s"] = time.perf_counter() - t0
    return reduction


# ---------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class ReducedEvaluation:
    """The reduced model at coordinates q under efforts λ."""

    q: np.ndarray  #: (r,) [m]
    positions: np.ndarray  #: (N, 3) [m]
    state: object  #: element state of the elastic elements (all, or the ECSW sample)
    strokes: np.ndarray  #: (n_a,)
    jacobian_r: np.ndarray  #: Φᵀ J_aᵀ (r, n_a)
    elastic_r: np.ndarray  #: Φᵀ f_int (r,) [N] (with the sample's offset when hyper-reduced)
    residual: np.ndarray  #: Φᵀ r (r,) [N]
    potential: float  #: Π [J]
    residual_norm: float  #: |Φᵀ r| [N]


@dataclass(frozen=True)
class ReducedEquilibrium:
    """Outcome of :meth:`ReducedRobotModel.equilibrate`."""

    positions: np.ndarray
    iterations: int
    residual_norm: float
    tolerance: float
    wall_time: float


class ReducedRobotModel(QuasiStaticModelState):
    """The quasi-static model of a :class:`RobotModel` restricted to a trained basis (module
    docstring); the interface the FEM and compliance nodes use (``update``, ``step``,
    ``equilibrate``, ``snapshot``, ``set_state``, ``reset`` and the state properties).

    Args:
        full: the full model (its FEM, constraints, gravity and description; not solved).
        reduction: a reduction trained on that model.

    Raises:
        ReductionError: the reduction belongs to another model, or the model has contact.
    """

    #: no contact in a reduced model (the nodes read these)
    contact = None
    max_contacts = 0
    last_step_fraction = 1.0

    def __init__(self, full, reduction: ModelReduction) -> None:
        if getattr(full, "contact", None) is not None:
            raise ReductionError(
                f"robot {full.description.name!r} has a collision section: the reduced model does "
                "not model contact (run the full model, or disable contact)")
        check_reduction_fits(reduction, full)
        fem = full.fem
        self.reduction = reduction
        self.description = full.description
        self.mesh = full.mesh
        self.fem = fem
        self.actuators = full.actuators
        self.effectors = full.effectors
        self._kinds = full.actuator_kinds
        self.phi = np.ascontiguousarray(reduction.basis)
        self._x_ref = np.array(reduction.reference_positions)
        self._actuator_points = full.actuators.points_basis(self.phi)  # (3K_a, r)
        self._effector_points = full.effectors.points_basis(self.phi)  # (3K_e, r)
        self._gravity_r = self.phi.T @ fem.reduce(full.gravity_forces)
        self._elastic_fem = fem
        self._offset = np.zeros(self.size)
        if reduction.hyper_reduced:
            from soft_inverse_ros.core.sim.hyper_reduction import sampled_fem

            self._elastic_fem = sampled_fem(fem, reduction.hyper_elements, reduction.hyper_weights)
            self._offset = np.asarray(reduction.hyper_offset, float)
            nodes = np.unique(self._elastic_fem.tets)
            nodes = nodes[~fem.fixed_mask[nodes]]
            free_index = np.searchsorted(fem.free_nodes, nodes)
            self._elastic_dofs: slice | np.ndarray = (3 * free_index[:, None] + np.arange(3)).ravel()
        else:
            self._elastic_dofs = slice(None)
        self._elastic_global = fem.free_dofs[self._elastic_dofs]
        # K Φ by the compiled node-block product (every element: the sample's K is mostly empty)
        self._product = None if reduction.hyper_reduced else compiled_module("projection_kernels")
        self._chunk = (np.empty((3 * _CHUNK_BLOCKS, self.phi.shape[1]))
                       if self._product is not None else None)
        self._phi_elastic = np.ascontiguousarray(self.phi[self._elastic_dofs])
        self._q_rest = self.phi.T @ fem.reduce(fem.rest_points - self._x_ref)
        self._tolerance_scale = float(np.linalg.norm(self._gravity_r))
        self._check_reference()
        self.reset()

    def _check_reference(self) -> None:
        """Refuse reference positions that are not the model's equilibrium under gravity with
        zero efforts (clamped nodes off their places, or Φᵀ r(x_ref) above 1e-6 of the loads;
        the training leaves ~1e-9): a file edited, or written for a model since changed; and,
        for an element sample, a reduced stiffness that is not positive definite there (too
        coarse a sample). Over every element Φᵀ K Φ is positive definite by construction (Φ
        orthonormal, checked when read; K positive definite): not factorized here, which at
        50k nodes would add a tangent's ~0.13 s to every start."""
        fem = self.fem
        moved = float(np.abs(self._x_ref[fem.fixed_mask] - fem.rest_points[fem.fixed_mask]).max(initial=0.0))
        zero = np.zeros(self.n_actuators)
        at_ref = self._evaluate(np.zeros(self.size), zero)
        if moved > 1e-9 or not at_ref.residual_norm <= self._tolerance(at_ref, zero, 1e-6):
            raise ReductionError(
                f"the reduction's reference positions are not the equilibrium under gravity of robot "
                f"{self.description.name!r} (clamped nodes moved {moved:.1e} m, |Φᵀr| = "
                f"{at_ref.residual_norm:.1e} N): an edited file; rebuild it with `soft-inverse-ros reduce-model`")
        if not self.reduction.hyper_reduced:
            return
        try:
            la.cho_factor(self._tangent(at_ref))
        except la.LinAlgError:
            raise ReductionError(
                f"the reduced stiffness Φᵀ K Φ is singular at the reduction's reference state (its element "
                f"sample: {self.reduction.hyper_elements.size} of {fem.n_elements} elements; a smaller "
                "--hyper-tolerance): rebuild it with `soft-inverse-ros reduce-model`") from None

    @property
    def size(self) -> int:
        """r, the number of reduced coordinates."""
        return self.phi.shape[1]

    @property
    def q(self) -> np.ndarray:
        """Reduced coordinates (r,) [m] of the current state."""
        return self._ev.q.copy()

    def reset(self) -> None:
        """The rest shape (in the span by construction) with zero efforts."""
        self._lambda = np.zeros(self.n_actuators)
        self._ev = self._evaluate(self._q_rest, self._lambda)

    def set_state(self, positions: np.ndarray, efforts: np.ndarray) -> None:
        """Positions (N, 3) [m] projected on the basis (exact for the model's own states,
        the nearest state in the span otherwise) and efforts (n_a,)."""
        lam = self._check_efforts(efforts)
        x = np.asarray(positions, float).reshape(self.fem.n_nodes, 3)
        q = self.phi.T @ self.fem.reduce(x - self._x_ref)
        self._ev = self._evaluate(q, lam)
        self._lambda = lam

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self, q: np.ndarray, lam: np.ndarray, reuse: ReducedEvaluation | None = None) -> ReducedEvaluation:
        """The state x_ref + Φ q under λ (``reuse``: an evaluation at the same q, under other
        efforts, whose geometry and elastic forces are kept: only the load terms are redone)."""
        fem = self.fem
        if reuse is not None:
            x, state, strokes, jr, elastic = (reuse.positions, reuse.state, reuse.strokes,
                                              reuse.jacobian_r, reuse.elastic_r)
        else:
            q = np.asarray(q, float)
            x = self._x_ref + fem.expand(self._basis_times(q))
            state = self._elastic_fem.element_state(x)
            strokes, gradient = self.actuators.values_and_point_gradient(x)
            jr = self._actuator_points.T @ gradient.T if gradient.size else np.zeros((self.size, 0))
            elastic = self._project_forces(state.forces.reshape(-1)[self._elastic_global]) + self._offset
        g = elastic + self._gravity_r + jr @ lam
        potential = (state.energy - float(self._offset @ q) - float(self._gravity_r @ q)
                     - float(lam @ strokes))
        return ReducedEvaluation(q, x, state, strokes, jr, elastic, g, potential, float(np.linalg.norm(g)))

    def _basis_times(self, q: np.ndarray) -> np.ndarray:
        """Φ q (n_free,) [m]."""
        if self._product is None:
            return self.phi @ q
        out = np.empty(self.phi.shape[0])
        self._product.basis_times(self.phi, q, out)
        return out

    def _project_forces(self, forces: np.ndarray) -> np.ndarray:
        """Φᵀ f (r,) [N] of forces on the elastic DOFs."""
        if self._product is None:
            return self._phi_elastic.T @ forces
        out = np.empty(self.size)
        self._product.basis_transpose_times(self._phi_elastic, np.ascontiguousarray(forces), out)
        return out

    def _under(self, lam: np.ndarray) -> ReducedEvaluation:
        if np.array_equal(lam, self._lambda):
            return self._ev
        return self._evaluate(self._ev.q, lam, reuse=self._ev)

    def _assemble(self, ev: ReducedEvaluation):
        """K(x) as the tangent's projection reads it: the upper node blocks for the compiled
        product, else the CSR matrix."""
        if self._product is None:
            return self._elastic_fem.stiffness(ev.state)
        return self._elastic_fem.upper_block_stiffness(ev.state)

    def _tangent(self, ev: ReducedEvaluation) -> np.ndarray:
        """K_r = Φᵀ K(x) Φ (r, r) [N/m] (the co-rotational tangent, as the full update uses)."""
        k = self._assemble(ev)
        if self._product is None:
            kr = self._phi_elastic.T @ np.asarray(k @ self.phi)[self._elastic_dofs]
            return 0.5 * (kr + kr.T)
        # M = Φᵀ (K_U + D/2) Φ chunk by chunk of node rows (each chunk still in cache)
        m = np.zeros((self.size, self.size))
        blocks, chunk = self.phi.shape[0] // 3, self._chunk.shape[0] // 3
        for b0 in range(0, blocks, chunk):
            b1 = min(blocks, b0 + chunk)
            out = self._chunk[: 3 * (b1 - b0)]
            self._product.upper_blocks_times_dense(k.block_ptr, k.block_cols, k.blocks, self.phi, b0, b1, out)
            m += self.phi[3 * b0:3 * b1].T @ out
        return m + m.T

    def _effector_jacobian_r(self, positions: np.ndarray) -> np.ndarray:
        """Φᵀ J_eᵀ (r, n_e) at positions (N, 3) [m]."""
        _, gradient = self.effectors.values_and_point_gradient(positions)
        if not gradient.size:
            return np.zeros((self.size, 0))
        return self._effector_points.T @ gradient.T

    def _tolerance(self, ev: ReducedEvaluation, lam: np.ndarray, rtol: float) -> float:
        """Residual tolerance [N]: ``rtol`` times the reduced loads' sizes (as the full solver)."""
        scale = (self._tolerance_scale + float(np.linalg.norm(ev.jacobian_r @ lam))
                 + float(np.linalg.norm(ev.elastic_r)))
        return rtol * scale + 1e-300

    def _line_search(self, ev: ReducedEvaluation, lam: np.ndarray, dq: np.ndarray,
                     max_backtracks: int = 12) -> tuple[ReducedEvaluation, float]:
        """Armijo backtracking on Π along dq (or a smaller reduced residual); the full step
        when ``ev`` is already at equilibrium (Π and the residual at round-off)."""
        if not np.all(np.isfinite(dq)):
            raise ConvergenceError("reduced Newton direction is not finite")
        slope = -float(ev.residual @ dq)
        at_equilibrium = ev.residual_norm <= self._tolerance(ev, lam, 1e-9)
        alpha = 1.0
        for _ in range(max_backtracks + 1):
            new = self._evaluate(ev.q + alpha * dq, lam)
            finite = math.isfinite(new.potential) and math.isfinite(new.residual_norm)
            if finite and (at_equilibrium or new.potential <= ev.potential + 1e-4 * alpha * slope
                           or new.residual_norm < ev.residual_norm):
                return new, alpha
            alpha *= 0.5
        raise ConvergenceError(f"reduced line search failed: no step length decreases the potential "
                               f"(|Φᵀr| = {ev.residual_norm:.3e} N)")

    # ------------------------------------------------------------------ advancing
    def step(self, lambda_a: np.ndarray, *, newton_iterations: int = 1):
        """Efforts λ and ``newton_iterations`` reduced Newton iterations (line-searched)."""
        if newton_iterations < 1:
            raise ValueError("newton_iterations must be >= 1")
        t0 = time.perf_counter()
        lam = self._check_efforts(lambda_a)
        ev = self._under(lam)
        before = ev.residual_norm
        alpha = 1.0
        for _ in range(newton_iterations):
            dq = la.solve(self._tangent(ev), ev.residual, assume_a="pos")
            ev, alpha = self._line_search(ev, lam, dq)
        self._ev, self._lambda = ev, lam
        return StepInfo(newton_iterations, ev.residual_norm, before, alpha, 0, time.perf_counter() - t0)

    def equilibrate(self, lambda_a: np.ndarray, *, from_rest: bool = False,
                    rtol: float = 1e-9) -> ReducedEquilibrium:
        """Reduced equilibrium under λ (Newton with line search, from the current state or
        from the rest shape).

        Raises:
            ConvergenceError: not converged in 100 iterations.
        """
        t0 = time.perf_counter()
        lam = self._check_efforts(lambda_a)
        ev = self._evaluate(self._q_rest, lam) if from_rest else self._under(lam)
        for it in range(_MAX_ITERATIONS + 1):
            tol = self._tolerance(ev, lam, rtol)
            if ev.residual_norm <= tol:
                self._ev, self._lambda = ev, lam
                return ReducedEquilibrium(ev.positions, it, ev.residual_norm, tol,
                                          time.perf_counter() - t0)
            if it == _MAX_ITERATIONS:
                break
            dq = la.solve(self._tangent(ev), ev.residual, assume_a="pos")
            ev, _ = self._line_search(ev, lam, dq)
        raise ConvergenceError(f"reduced equilibrium not reached in {_MAX_ITERATIONS} iterations "
                               f"(|Φᵀr| = {ev.residual_norm:.3e} N)")

    # ------------------------------------------------------------------ compliance
    def _compliance(self, ev: ReducedEvaluation, extra: np.ndarray | None = None):
        """(W blocks, solutions of the extra right-hand sides) at ``ev``: one Cholesky
        factorization of K_r, the n_a + n_e (+ extra) reduced columns."""
        t0 = time.perf_counter()
        jr, jer = ev.jacobian_r, self._effector_jacobian_r(ev.positions)
        rhs = np.hstack((jr, jer) if extra is None else (extra[:, None], jr, jer))
        factor = la.cho_factor(self._tangent(ev))
        sol = la.cho_solve(factor, rhs)
        first = 0 if extra is None else 1
        m = compliance_from_columns(jr, jer, sol[:, first:], wall_time=time.perf_counter() - t0)
        return m, (sol[:, 0] if extra is not None else None)

    def compliance(self) -> ComplianceMatrices:
        """W_aa, W_ea, W_ee at the current state (Galerkin: reduced columns, module doc)."""
        return self._compliance(self._ev)[0]

    def update(self, lambda_a: np.ndarray, seq: int, stamp: float):
        """The low-rate update, as :meth:`RobotModel.update` (without contact): K_r and the
        Jacobians at x_k, one factorization for the Newton direction and the compliance
        columns; the state advances to x_{k+1} (line search); the snapshot carries W at
        x_k with x_e0 and δ_a0 at x_{k+1}."""
        t0 = time.perf_counter()
        lam = self._check_efforts(lambda_a)
        ev = self._under(lam)
        before = ev.residual_norm
        m, dq = self._compliance(ev, extra=ev.residual)
        new, alpha = self._line_search(ev, lam, dq)
        self._ev, self._lambda = new, lam
        info = StepInfo(1, new.residual_norm, before, alpha, 0, time.perf_counter() - t0)
        snap = make_snapshot(
            m, seq=seq, stamp=stamp, actuator_names=self.actuator_names,
            actuator_kinds=self._kinds, effector_names=self.effector_names,
            effector_position=self.effectors.values(new.positions),
            actuator_stroke=new.strokes, lambda0=lam, fem_step_time=info.wall_time,
        )
        return info, snap
