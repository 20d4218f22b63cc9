"""A serial rigid chain read from a URDF with Pinocchio (BSD; ``pin`` on PyPI).

Kinematics and Jacobians come from Pinocchio, not hand-written code. Frames: positions in m
in the URDF root (world) frame; joint coordinates q in rad (revolute) or m (prismatic).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import types
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from soft_inverse_ros.core.config_files import ConfigNotFoundError, find_config


@contextlib.contextmanager
def _stderr_captured():
    """What the process writes to file descriptor 2 inside the block (C++ libraries'
    messages), in the yielded object's ``text`` once the block ends."""
    said = types.SimpleNamespace(text="")
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            said.text = tmp.read().decode(errors="replace")


#: Pinocchio joint models of 1-DOF joints, by kind
_JOINT_KINDS = {**{f"JointModelR{a}": "revolute" for a in "XYZ"},
                "JointModelRevoluteUnaligned": "revolute",
                **{f"JointModelP{a}": "prismatic" for a in "XYZ"},
                "JointModelPrismaticUnaligned": "prismatic"}


def mimic_joints(path: str | Path) -> list[tuple[str, str]]:
    """(joint, the joint it mimics) for every URDF ``<joint>`` of the file at ``path`` with a
    ``<mimic joint="...">`` tag, in file order (read from the XML: Pinocchio's URDF parser
    loads a mimic joint as one more independent joint unless told otherwise). A file that
    is not XML gives none (the URDF parser reports it)."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return []
    return [(joint.get("name", "?"), mimic.get("joint", "?"))
            for joint in root.iter("joint") for mimic in joint.findall("mimic")]


@dataclass(frozen=True)
class JointLimits:
    """Per-joint limits from the URDF: position (rad or m), velocity (rad/s or m/s), effort (N m or N)."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


class RigidChain:
    """Forward kinematics and frame Jacobians of a fixed-base URDF chain (Pinocchio model)."""

    def __init__(self, model: pin.Model) -> None:
        self.model = model
        self.data = model.createData()

    @classmethod
    def from_urdf(cls, path: str | Path) -> "RigidChain":
        """Load a URDF: a file path, or a bare name (``hybrid_arm``, ``hybrid_arm.urdf``) of
        a URDF in the package's ``config/robots`` (a bare name without ``.urdf`` is always
        the package's, whatever file of that name the working folder holds). A missing or
        malformed file, or a chain this class does not model (:meth:`_check`), is a
        one-line ``SystemExit``."""
        p = Path(path)
        bare = p.parent == Path(".")
        if not (p.is_file() and (p.suffix == ".urdf" or not bare)):
            if not bare:
                raise SystemExit(f"URDF not found: {path}")
            try:
                p = find_config(Path("robots") / (p.name if p.suffix == ".urdf" else f"{p.name}.urdf"))
            except ConfigNotFoundError as exc:
                raise SystemExit(f"URDF not found: {path} ({' '.join(str(exc).split())})") from None
        with _stderr_captured() as said:  # urdfdom prints its parse errors to fd 2, over lines
            try:
                model = pin.buildModelFromUrdf(str(p))
            except (ValueError, RuntimeError) as exc:
                model, error = None, " ".join(str(exc).split())
        if model is None:
            detail = " ".join(said.text.split())
            raise SystemExit(f"cannot read URDF {p}: {error}" + (f" (URDF parser: {detail})" if detail else ""))
        if said.text:
            sys.stderr.write(said.text)  # a parsed file's warnings, as the parser gave them
        mimics = mimic_joints(p)
        if mimics:
            joint, leader = mimics[0]
            raise SystemExit(f"URDF {p}: joint {joint!r} mimics joint {leader!r} (<mimic>): a hybrid "
                             "description's joints are independent position servos, one per URDF joint")
        chain = cls(model)
        problem = chain._check()
        if problem is not None:
            raise SystemExit(f"URDF {p}: {problem}")
        return chain

    def _check(self) -> str | None:
        """What this chain has that the hybrid models do not handle, else None: a joint that
        is not a 1-DOF revolute or prismatic one (continuous, floating, planar, ...), a
        joint whose position limits are reversed (lower > upper), whose axis is zero (it
        moves nothing) or whose effort limit is not > 0, a link of negative or non-finite mass
        or with an inertia that is not positive semi-definite. (Mimic joints are found in
        the URDF's XML by :meth:`from_urdf`: the model holds them as independent joints.)"""
        m = self.model
        for joint, name in zip(list(m.joints)[1:], self.joint_names):
            kind = _JOINT_KINDS.get(joint.shortname())
            if kind is None or joint.nq != 1 or joint.nv != 1:
                return (f"joint {name!r} is a {joint.shortname().removeprefix('JointModel')} joint; "
                        "only 1-DOF revolute and prismatic joints are modelled (no continuous, "
                        "floating or planar ones)")
        problem = self._reversed_limits()
        if problem is not None:
            return problem
        jac = pin.computeJointJacobians(m, self.data, pin.neutral(m))
        for i, name in enumerate(self.joint_names):
            if not np.linalg.norm(jac[:, i]) > 1e-12:
                return f"joint {name!r} has a zero axis: it moves nothing"
        effort = np.asarray(m.effortLimit, float)
        for i, name in enumerate(self.joint_names):
            if not effort[i] > 0:  # NaN too
                return f"joint {name!r} has effort limit {effort[i]:g}: its motor must give a torque > 0"
        for inertia, name in zip(m.inertias, m.names):
            eig = np.linalg.eigvalsh(np.asarray(inertia.inertia))
            if not (np.isfinite(inertia.mass) and inertia.mass >= 0 and np.all(np.isfinite(eig))
                    and eig.min() >= -1e-12 * max(1.0, eig.max())):
                return (f"the body of joint {name!r} has mass {float(inertia.mass):g} kg and inertia "
                        f"eigenvalues {np.round(eig, 9).tolist()} kg m^2: both must be >= 0")
        return None

    def _reversed_limits(self) -> str | None:
        """The first joint whose URDF ``<limit>`` has lower > upper, as one line, else None."""
        lim = self.limits()
        for name, kind, lo, hi in zip(self.joint_names, self.joint_kinds(), lim.lower, lim.upper):
            if lo > hi:
                unit = "rad" if kind == "revolute" else "m"
                return (f"joint {name!r} has its limits reversed: lower {lo:g} {unit} > upper {hi:g} {unit} "
                        "(swap them in its <limit> tag)")
        return None

    def joint_kinds(self) -> list[str]:
        """``"revolute"`` or ``"prismatic"`` per joint, in q order."""
        return [_JOINT_KINDS[j.shortname()] for j in list(self.model.joints)[1:]]

    @property
    def nq(self) -> int:
        """Number of joint coordinates (revolute/prismatic joints only: nq == nv)."""
        return int(self.model.nq)

    @property
    def joint_names(self) -> list[str]:
        """Actuated joint names in q order."""
        return list(self.model.names)[1:]

    def limits(self) -> JointLimits:
        """Joint limits as read from the URDF ``<limit>`` tags."""
        m = self.model
        return JointLimits(np.array(m.lowerPositionLimit), np.array(m.upperPositionLimit),
                           np.array(m.velocityLimit), np.array(m.effortLimit))

    def frame_id(self, name: str) -> int:
        """Pinocchio id of a link/frame name; unknown names are a one-line ``SystemExit``."""
        if not self.model.existFrame(name):
            raise SystemExit(f"frame {name!r} not in the URDF (frames: {[f.name for f in self.model.frames]})")
        return int(self.model.getFrameId(name))

    def frame_pose(self, q: np.ndarray, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) in m and rotation (3, 3) of ``frame`` at joint coordinates q."""
        pin.framesForwardKinematics(self.model, self.data, np.asarray(q, float))
        oMf = self.data.oMf[frame]
        return oMf.translation.copy(), oMf.rotation.copy()

    def frame_jacobian(self, q: np.ndarray, frame: int) -> np.ndarray:
        """(6, nq) Jacobian of ``frame``: rows 0-2 linear velocity of its origin (m/s per unit q̇),
        rows 3-5 angular velocity (rad/s), both expressed in the world frame."""
        q = np.asarray(q, float)
        pin.computeJointJacobians(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        return pin.getFrameJacobian(self.model, self.data, frame, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).copy()
