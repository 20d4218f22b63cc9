"""Hybrid robot descriptions: a rigid arm (URDF) carrying a soft part, against a soft environment.

A YAML file with ``type: hybrid`` (Coevoet et al., hybrid soft-rigid arms); every key below,
unknown keys are errors with a "did you mean" hint, units as in the soft robot descriptions
(:mod:`soft_inverse_ros.core.model.description`; bare numbers are SI, lengths in
``length_unit``)::

    type: hybrid
    name: hybrid_arm
    frame_id: base_link
    arm:
      urdf: hybrid_arm.urdf       # relative to this YAML's folder (or a name in config/robots);
                                  # the soft part hangs on its frame "flange"
    soft_part:                    # the soft cylinder: a hex-split box, base rigidified to the flange
      size: "[12, 12, 50] mm"     # x, y across, z along the flange axis
      divisions: [2, 2, 5]
      material: {young_modulus: 0.8 MPa, poisson_ratio: 0.45, density: 1100 kg/m^3}
    probe:                        # the probe: the soft part's tip face centroid; its axis runs
      name: probe                 # from the centroid of the layer behind it through the tip.
      objective: alignment        # the effector rows: the target's projection on the probe axis
    environment:                  # the soft block, bottom clamped, below the probe at home
      size: "[80, 80, 40] mm"
      divisions: [8, 8, 4]
      clearance: 0.1 mm           # probe tip above the block's top face at home (> 0)
      material: {young_modulus: 30 kPa, poisson_ratio: 0.45}
    contact:
      force_sum_max: 1 N          # eq. 14: the sum of the contact forces at most this
      min_force_sum: 0.05 N       # and at least this (stay in contact), 0: none
    command_period: 1 ms          # the controller's tick: per-tick variation = max_velocity x this
                                  # (at most 0.1 s; the controller's rate_hz must be 1 / this)
    joints:                       # position servos, URDF order, one per URDF joint
      - {name: j1, stiffness: 50 N*m/rad, home: 0 rad, min_position: -2.6 rad,
         max_position: 2.6 rad, max_velocity: 2 rad/s}
    soft_actuators:               # optional: soft actuators of the soft part, after the joints
      - name: push                # a linear force between a point of the flange (anchor) and
        type: force               # the soft part's node nearest ``point`` (both in the flange
        anchor: "[0, 0, 0] mm"    # frame at home): effort f [N] > 0 pushes them apart along
        point: "[0, 0, 50] mm"    # their line; stroke = their distance change [m]
        min_force: -2 N
        max_force: 2 N
        max_stroke: 5 mm          # min_stroke defaults to -max_stroke; max_force_step and
                                  # max_stroke_step (per command) optional

Joints are actuators of the inverse QP like cables and cavities (Coevoet eq. 13): a
position servo of stiffness k driven to q_cmd pushes its joint with k (q_cmd − q); the
actuator's effort is λ = k (q_cmd − q_home) [N m] (so the QP's energy term pulls toward the
home posture) and its stroke the joint angle q [rad]. Limits: λ in k ([min, max]_position −
home), q in [min, max]_position, per-tick variation k · max_velocity · command_period and
max_velocity · command_period. The joint's position setpoint [rad] is
``home + λ / k`` (:meth:`HybridDescription.joint_positions`). Joint limits must lie within
the URDF's. Soft actuators are effort-driven (the controller commands their force, MODE_FORCE)
and enter the same QP as further FORCE columns.

The URDF is in metres (an arm reaching more than :data:`MAX_ARM_REACH_M` at home is refused)
and its joints are independent (no ``<mimic>``). Implausible materials (a bare
``young_modulus: 0.8`` is 0.8 Pa) are logged as warnings when the description is read,
as for the soft robots (:meth:`HybridDescription.plausibility_warnings`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from soft_inverse_ros.core.model import units
from soft_inverse_ros.core.model.description import (
    PLAUSIBLE_YOUNG_PA,
    DescriptionError,
    _as_list,
    _bounds,
    _check_bounds,
    _Context,
    _Reader,
    _wrap,
    parse_robot_description,
    plausibility_warnings,
    read_description_yaml,
)
from soft_inverse_ros.core.model.snapshot import ActuatorKind

#: torque stiffness N m/rad and angular velocity rad/s (units.Dim: length, mass, time, angle)
TORQUE_STIFFNESS: units.Dim = (2, 1, -2, -1)
ANGULAR_VELOCITY: units.Dim = (0, 0, -1, 1)
#: the URDF frame the soft part hangs on
FLANGE_FRAME = "flange"
#: an arm whose flange is farther than this from its base at home [m] is refused: serial arms
#: reach a few metres at most, while a URDF written in millimetres multiplies every length by
#: 1000 (the shipped 0.27 m arm reached 271 m); only an arm under 1 cm would slip through
MAX_ARM_REACH_M = 10.0
#: a command_period above this [s] is refused: the controller's tick is 1 ms in the shipped
#: graph (inverse_controller_node rate_hz 1000), and a tick slower than the 10 Hz of the
#: hybrid model's snapshots is no inverse control loop; a bare 1 (read as 1 s) was meant as ms
MAX_COMMAND_PERIOD_S = 0.1
#: a controller tick within this relative difference of command_period matches it (floating
#: point: 1 / 1000 Hz against 1 ms)
COMMAND_PERIOD_RTOL = 1e-6

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class JointActuatorSpec:
    """A joint position servo as an inverse-QP actuator (module docstring; SI: rad, N m).

    Attributes:
        name: URDF joint name.
        stiffness: servo stiffness k [N m/rad] (> 0).
        home: home angle [rad]; min_position, max_position: angle range [rad].
        max_velocity: [rad/s] (> 0); command_period: the controller's tick [s].
    """

    name: str
    stiffness: float
    home: float
    min_position: float
    max_position: float
    max_velocity: float
    command_period: float

    def __post_init__(self) -> None:
        for key in ("stiffness", "max_velocity", "command_period"):
            v = getattr(self, key)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{key} must be > 0 and finite, got {v}")
        if not (self.min_position < self.max_position):
            raise ValueError(f"min_position ({self.min_position}) must be < max_position ({self.max_position})")
        if not (self.min_position <= self.home <= self.max_position):
            raise ValueError(f"home {self.home} rad is outside [{self.min_position}, {self.max_position}] rad")

    # the actuator-limit fields read by core/control/actuator_limits.limits_from_description
    @property
    def min_force(self) -> float:
        return self.stiffness * (self.min_position - self.home)

    @property
    def max_force(self) -> float:
        return self.stiffness * (self.max_position - self.home)

    @property
    def min_stroke(self) -> float:
        return self.min_position

    @property
    def max_stroke(self) -> float:
        return self.max_position

    @property
    def max_force_step(self) -> float:
        return self.stiffness * self.max_velocity * self.command_period

    @property
    def max_stroke_step(self) -> float:
        return self.max_velocity * self.command_period


@dataclass(frozen=True, eq=False)
class SoftForceSpec:
    """A linear force actuator between a flange point and a soft-part point (module
    docstring). ``anchor``, ``point``: (3,) [m] in the flange frame at home; efforts [N]
    (> 0 pushes apart), strokes [m] (distance change), per-command steps."""

    name: str
    anchor: np.ndarray
    point: np.ndarray
    min_force: float
    max_force: float
    min_stroke: float
    max_stroke: float
    max_force_step: float = math.inf
    max_stroke_step: float = math.inf

    def __post_init__(self) -> None:
        for key in ("anchor", "point"):
            v = np.array(getattr(self, key), dtype=float)
            if v.shape != (3,) or not np.all(np.isfinite(v)):
                raise ValueError(f"{key} must be a finite 3-vector [m]")
            v.setflags(write=False)
            object.__setattr__(self, key, v)
        if not np.linalg.norm(self.point - self.anchor) > 1e-6:
            raise ValueError("point and anchor must be apart (the force acts along their line)")
        _check_bounds(self, "force", "stroke")


@dataclass(frozen=True)
class SoftBoxSpec:
    """A hex-split box of soft material: size [m], divisions, Young's modulus [Pa], Poisson
    ratio, density [kg/m^3] (None: a quasi-static body) and, for the environment, the
    clearance [m] of the probe tip above its top face at home."""

    size: tuple[float, float, float]
    divisions: tuple[int, int, int]
    young_modulus: float
    poisson_ratio: float
    density: float | None = None
    clearance: float = 0.0

    def __post_init__(self) -> None:
        if len(self.size) != 3 or not all(math.isfinite(s) and s > 0 for s in self.size):
            raise ValueError(f"size must be 3 positive lengths, got {list(self.size)}")
        if len(self.divisions) != 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1
                                                for d in self.divisions):
            raise ValueError(f"divisions must be 3 integers >= 1, got {list(self.divisions)}")
        if not (math.isfinite(self.young_modulus) and self.young_modulus > 0):
            raise ValueError(f"young_modulus must be > 0 Pa, got {self.young_modulus}")
        if not (-1.0 < self.poisson_ratio < 0.5):
            raise ValueError(f"poisson_ratio must be in (-1, 0.5), got {self.poisson_ratio}")
        if self.density is not None and not (math.isfinite(self.density) and self.density > 0):
            raise ValueError(f"density must be > 0 kg/m^3, got {self.density}")
        if not (math.isfinite(self.clearance) and self.clearance >= 0):
            raise ValueError(f"clearance must be >= 0 m, got {self.clearance}")


@dataclass(frozen=True, eq=False)
class HybridDescription:
    """A hybrid robot (module docstring). ``joints`` in URDF order, then ``soft_actuators``:
    together the ``actuators`` (the QP's columns, in this order)."""

    name: str
    source: Path | None
    frame_id: str
    urdf: Path
    soft_part: SoftBoxSpec
    environment: SoftBoxSpec
    probe_name: str
    joints: tuple[JointActuatorSpec, ...]
    force_sum_max: float
    min_force_sum: float
    command_period: float
    soft_actuators: tuple[SoftForceSpec, ...] = ()

    is_hybrid = True

    @property
    def actuators(self) -> tuple:
        return (*self.joints, *self.soft_actuators)

    @property
    def n_joints(self) -> int:
        return len(self.joints)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def actuator_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actuators)

    @property
    def actuator_kinds(self) -> tuple[ActuatorKind, ...]:
        """Bilateral FORCE columns in the snapshot: joints (effort N m, stroke rad) and soft
        force actuators (effort N, stroke m)."""
        return tuple(ActuatorKind.FORCE for _ in self.actuators)

    @property
    def effector_row_names(self) -> tuple[str, ...]:
        return tuple(f"{self.probe_name}.{a}" for a in "xyz")

    @property
    def home(self) -> np.ndarray:
        return np.array([j.home for j in self.joints])

    @property
    def joint_stiffness(self) -> np.ndarray:
        return np.array([j.stiffness for j in self.joints])

    def joint_positions(self, efforts: np.ndarray) -> np.ndarray:
        """Position setpoints [rad] of the joints for the efforts λ of all actuators (the
        joints' first, [N m]): home + λ / k."""
        return self.home + np.asarray(efforts, float)[: self.n_joints] / self.joint_stiffness

    def joint_efforts(self, positions: np.ndarray) -> np.ndarray:
        """Efforts λ [N m] of joint setpoints [rad]: k (q_cmd − home)."""
        return self.joint_stiffness * (np.asarray(positions, float) - self.home)

    def size_m(self) -> float:
        """The scale of the robot for the controller's snapshot plausibility checks
        (core/control/snapshot_check.py: strokes and effector values up to 10 sizes): the
        arm's reach at home plus the soft part [m], and at least 2π/10 so that joint strokes
        [rad] up to one turn pass."""
        reach = self.arm_reach() + float(np.linalg.norm(self.soft_part.size))
        return max(reach, 2.0 * math.pi / 10.0)

    def plausibility_warnings(self) -> list[str]:
        """Warnings (empty when plausible) for units that are most likely wrong: the soft
        part's size, mass and Young's modulus against a soft robot's
        (:func:`~soft_inverse_ros.core.model.description.plausibility_warnings`; a bare
        ``young_modulus: 0.8`` is 0.8 Pa) and the environment's Young's modulus against
        the same range."""
        soft, env = self.soft_part, self.environment
        volume = float(np.prod(soft.size))  # [m^3]
        mass = (soft.density or 0.0) * volume  # [kg]
        out = [f"soft_part: {w}" for w in plausibility_warnings(float(np.linalg.norm(soft.size)), mass,
                                                                 soft.young_modulus)]
        lo, hi = PLAUSIBLE_YOUNG_PA
        if not lo <= env.young_modulus <= hi:
            out.append(f"environment: implausible Young's modulus for a soft body: {env.young_modulus:.3g} Pa "
                       f"(expected {lo:g}..{hi:g} Pa): check its unit, e.g. '30 kPa'")
        return out

    def arm_reach(self, chain=None) -> float:
        """The flange's distance from the base frame's origin at home [m]; ``chain``: the
        description's URDF already loaded (:class:`~soft_inverse_ros.core.rigid.chain.RigidChain`),
        else read here."""
        if chain is None:
            from soft_inverse_ros.core.rigid.chain import RigidChain

            chain = RigidChain.from_urdf(self.urdf)
        p, _ = chain.frame_pose(self.home, chain.frame_id(FLANGE_FRAME))
        return float(np.linalg.norm(p))


def _box(data: Any, key: str, ctx: _Context, *, dynamic: bool) -> SoftBoxSpec:
    r = _Reader(data, key, ctx)
    size = r.vector("size", units.LENGTH)
    div_raw = r.raw("divisions")
    clearance = 0.0 if dynamic else r.quantity("clearance", units.LENGTH)
    m = _Reader(r.raw("material"), f"{key}.material", ctx)
    young = m.quantity("young_modulus", units.PRESSURE)
    nu = m.quantity("poisson_ratio", units.DIMENSIONLESS)
    density = m.quantity("density", units.DENSITY) if dynamic else None
    m.finish()
    r.finish()
    if not dynamic and not clearance > 0:
        raise ctx.error(f"{key}.clearance", f"must be > 0 m, got {clearance}")
    if not isinstance(div_raw, list):
        raise ctx.error(f"{key}.divisions", f"expected 3 integers, got {div_raw!r}")
    return _wrap(ctx, key, lambda: SoftBoxSpec(tuple(float(s) for s in size), tuple(div_raw),  # type: ignore[arg-type]
                                                young, nu, density, clearance))


def _joint(data: Any, key: str, ctx: _Context, period: float) -> JointActuatorSpec:
    r = _Reader(data, key, ctx)
    name = r.string("name")
    key = f"{key} ({name})"
    r.key = key
    vals = {
        "stiffness": r.quantity("stiffness", TORQUE_STIFFNESS),
        "home": r.quantity("home", units.ANGLE),
        "min_position": r.quantity("min_position", units.ANGLE),
        "max_position": r.quantity("max_position", units.ANGLE),
        "max_velocity": r.quantity("max_velocity", ANGULAR_VELOCITY),
    }
    r.finish()
    return _wrap(ctx, key, lambda: JointActuatorSpec(name, command_period=period, **vals))


def _soft_actuator(data: Any, key: str, ctx: _Context) -> SoftForceSpec:
    r = _Reader(data, key, ctx)
    name = r.string("name")
    key = f"{key} ({name})"
    r.key = key
    kind = r.string("type")
    if kind != "force":
        raise ctx.error(f"{key}.type", f"expected 'force' (a linear force actuator), got {kind!r}")
    anchor = r.vector("anchor", units.LENGTH)
    point = r.vector("point", units.LENGTH)
    b = _bounds(r, {}, units.LENGTH)
    r.finish()
    return _wrap(ctx, key, lambda: SoftForceSpec(name, anchor, point, **b))


#: a soft part or environment larger than this many arm reaches is refused (units)
_SIZE_FACTOR = 10.0


def _check_urdf(desc: HybridDescription, ctx: _Context) -> None:
    """The joints match the URDF (names, order, revolute) and lie within its limits; the
    arm's reach is at most :data:`MAX_ARM_REACH_M` (metres, not millimetres); the soft part,
    the environment and the clearance are not absurd against that reach."""
    from soft_inverse_ros.core.rigid.chain import RigidChain

    try:
        chain = RigidChain.from_urdf(desc.urdf)
    except SystemExit as exc:
        raise ctx.error("arm.urdf", str(exc)) from None
    if not chain.model.existFrame(FLANGE_FRAME):
        raise ctx.error("arm.urdf", f"the URDF has no frame {FLANGE_FRAME!r} to carry the soft part")
    if list(desc.joint_names) != chain.joint_names:
        raise ctx.error("joints", f"expected one entry per URDF joint in order {chain.joint_names}, "
                                  f"got {list(desc.joint_names)}")
    prismatic = [n for n, kind in zip(chain.joint_names, chain.joint_kinds()) if kind != "revolute"]
    if prismatic:
        raise ctx.error("arm.urdf", f"joints {prismatic} are prismatic: a hybrid description's joints "
                                    "are revolute position servos (angles in rad, stiffness in N*m/rad)")
    # lengths against the arm (a bare number is metres: "size: [12, 12, 50]" was a 50 m rod)
    reach = desc.arm_reach(chain)
    if not reach <= MAX_ARM_REACH_M:
        raise ctx.error("arm.urdf", f"the arm's flange is {reach:.3g} m from its base at home, more than "
                                    f"{MAX_ARM_REACH_M:g} m: URDF lengths in millimetres? (URDF lengths are metres)")
    for key, box in (("soft_part", desc.soft_part), ("environment", desc.environment)):
        if reach > 0 and max(box.size) > _SIZE_FACTOR * reach:
            raise ctx.error(f"{key}.size", f"{np.round(box.size, 6).tolist()} m is more than {_SIZE_FACTOR:g} times "
                                           f"the arm's reach ({reach:.3g} m at home): mm written as m?")
    if reach > 0 and desc.environment.clearance > reach:
        raise ctx.error("environment.clearance", f"{desc.environment.clearance:g} m is more than the arm's "
                                                 f"reach ({reach:.3g} m at home): mm written as m?")
    lim = chain.limits()
    for i, j in enumerate(desc.joints):
        if j.min_position < lim.lower[i] - 1e-9 or j.max_position > lim.upper[i] + 1e-9:
            raise ctx.error(f"joints[{i}] ({j.name})", f"position range [{j.min_position:g}, {j.max_position:g}] rad "
                                                        f"exceeds the URDF's [{lim.lower[i]:g}, {lim.upper[i]:g}] rad")
        if j.max_velocity > lim.velocity[i] + 1e-9:
            raise ctx.error(f"joints[{i}] ({j.name}).max_velocity",
                            f"{j.max_velocity:g} rad/s exceeds the URDF's {lim.velocity[i]:g} rad/s")


def command_period_mismatch(desc: HybridDescription, rate_hz: float) -> str | None:
    """Why a controller ticking at ``rate_hz`` [Hz] (> 0) cannot run ``desc``, else None: the
    description's per-tick joint limits (max_velocity × command_period, module docstring)
    hold for ticks of ``command_period`` [s] only; at another rate the joints would be
    commanded faster or slower than their max_velocity."""
    tick = 1.0 / rate_hz
    if math.isclose(tick, desc.command_period, rel_tol=COMMAND_PERIOD_RTOL):
        return None
    return (f"rate_hz {rate_hz:g} (a {1e3 * tick:g} ms tick) differs from the command_period "
            f"{1e3 * desc.command_period:g} ms of robot {desc.name!r}, which sets its per-tick joint limits: "
            "make them match")


def is_hybrid_data(data: Any) -> bool:
    """Whether parsed YAML ``data`` is a hybrid description (``type: hybrid``)."""
    return isinstance(data, dict) and data.get("type") == "hybrid"


def parse_hybrid_description(data: Any, *, source: Path | None = None) -> HybridDescription:
    """Build a :class:`HybridDescription` from parsed YAML ``data``.

    Raises:
        DescriptionError: one line naming the file and the key.
    """
    base_dir = source.resolve().parent if source is not None else Path.cwd()
    ctx = _Context(source=source, base_dir=base_dir)
    r = _Reader(data, "", ctx)
    if r.string("type") != "hybrid":
        raise ctx.error("type", "expected 'hybrid'")
    if r.has("length_unit"):
        try:
            ctx.length_scale = units.length_unit_scale(r.raw("length_unit"), key="length_unit")
        except units.UnitError as exc:
            raise ctx.error(None, str(exc)) from None
    name = r.string("name", source.stem if source is not None else "hybrid")
    frame_id = r.string("frame_id", "base_link")
    r.raw("description", None)  # free text, for humans
    arm = _Reader(r.raw("arm"), "arm", ctx)
    urdf_raw = arm.raw("urdf")
    arm.finish()
    urdf = ctx.path(urdf_raw, "arm.urdf")
    if not urdf.is_file():  # a bare name: the package's config/robots (an installed description)
        from soft_inverse_ros.core.config_files import ConfigNotFoundError, find_config

        if Path(str(urdf_raw)).parent != Path("."):
            raise ctx.error("arm.urdf", f"URDF file {urdf} not found")
        try:
            urdf = find_config(Path("robots") / Path(str(urdf_raw)).name)
        except ConfigNotFoundError:
            raise ctx.error("arm.urdf", f"URDF file {urdf} not found") from None
    soft = _box(r.raw("soft_part"), "soft_part", ctx, dynamic=True)
    env = _box(r.raw("environment"), "environment", ctx, dynamic=False)
    probe = _Reader(r.raw("probe"), "probe", ctx)
    probe_name = probe.string("name", "probe")
    objective = probe.string("objective", "alignment")
    probe.finish()
    if objective != "alignment":
        raise ctx.error("probe.objective", f"expected 'alignment' (the target on the probe axis), got {objective!r}")
    contact = _Reader(r.raw("contact"), "contact", ctx)
    fmax = contact.quantity("force_sum_max", units.FORCE)
    fmin = contact.quantity("min_force_sum", units.FORCE, 0.0)
    contact.finish()
    if not (fmax > 0 and 0 <= fmin < fmax and math.isfinite(fmin)):
        raise ctx.error("contact", f"need 0 <= min_force_sum ({fmin}) < force_sum_max ({fmax}), force_sum_max > 0 N")
    period = r.quantity("command_period", units.TIME)
    if not (math.isfinite(period) and period > 0):
        raise ctx.error("command_period", f"must be > 0 s, got {period}")
    if period > MAX_COMMAND_PERIOD_S:
        raise ctx.error("command_period", f"{period:g} s is more than {MAX_COMMAND_PERIOD_S:g} s (the controller's "
                                          "tick): ms written as s? (a bare number is seconds: write e.g. '1 ms')")
    joints = tuple(_joint(j, f"joints[{i}]", ctx, period)
                   for i, j in enumerate(_as_list(r.raw("joints"), "joints", ctx)))
    soft_acts = tuple(_soft_actuator(a, f"soft_actuators[{i}]", ctx)
                      for i, a in enumerate(_as_list(r.raw("soft_actuators", None), "soft_actuators", ctx)))
    r.finish()
    if not joints:
        raise ctx.error("joints", "a hybrid robot needs its joints as actuators")
    names = [a.name for a in (*joints, *soft_acts)]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ctx.error("soft_actuators", f"actuator names must be unique, repeated: {dup}")
    desc = HybridDescription(name, source, frame_id, urdf, soft, env, probe_name, joints, fmax, fmin, period,
                             soft_acts)
    _check_urdf(desc, ctx)
    for warning in desc.plausibility_warnings():
        _LOG.warning("robot %s: %s", name, warning)
    for i, a in enumerate(soft_acts):
        half = 0.5 * np.asarray(soft.size)
        box_lo, box_hi = np.array([-half[0], -half[1], 0.0]), np.array([half[0], half[1], soft.size[2]])
        if np.any(a.point < box_lo - 1e-9) or np.any(a.point > box_hi + 1e-9):
            raise ctx.error(f"soft_actuators[{i}] ({a.name}).point",
                            f"{np.round(a.point, 6).tolist()} m is outside the soft part "
                            f"{np.round(box_lo, 6).tolist()} .. {np.round(box_hi, 6).tolist()} m (flange frame)")
    return desc


def load_hybrid_description(name_or_path: str) -> HybridDescription:
    """Read a hybrid description YAML (a path, or a name in ``config/robots``).

    Raises:
        DescriptionError: unreadable YAML, not ``type: hybrid``, or invalid content.
        soft_inverse_ros.core.config_files.ConfigNotFoundError: unknown name / missing file.
    """
    path, data = read_description_yaml(name_or_path)
    if not is_hybrid_data(data):
        raise DescriptionError(f"{path}: not a hybrid robot description (no 'type: hybrid')")
    return parse_hybrid_description(data, source=path)


def load_any_description(name_or_path: str):
    """A :class:`~soft_inverse_ros.core.model.description.RobotDescription`, or a
    :class:`HybridDescription` for a ``type: hybrid`` file (both give actuator names,
    kinds, limits and effector rows to the controller)."""
    path, data = read_description_yaml(name_or_path)
    if is_hybrid_data(data):
        return parse_hybrid_description(data, source=path)
    return parse_robot_description(data, source=path)
