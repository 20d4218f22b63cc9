"""The ``mocap`` configuration block (YAML), validated once into dataclasses.

Example (see ``config/mocap*.yaml``)::

    mocap:
      backend: motioncapture        # motioncapture | replay_csv | replay_bag | simulated
      robot_frame: base_link
      registration: registration.yaml   # path (relative to this file) or inline block
      motioncapture: {system: vicon, hostname: vicon-pc.lab, latency: 0.004}
      replay: {path: run.mcap, topics: {/mocap/tip/pose: tip}, stamp_tolerance: 0.0}
      simulated: {noise_std: 0.0002, latency: 0.01, seed: 1}
      filter: {max_jump: 0.02, reacquire_after: 5, force_reacquire_after: 50,
               stale_after: 0.1}
      effector: {mode: rigid_body, name: tip, offset: [0, 0, 0.01]}

Only the section of the chosen backend is required. Errors name the offending key.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import typing
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from soft_inverse_ros.core.config_files import ConfigNotFoundError, config_dirs, find_config
from soft_inverse_ros.core.mocap.effector import EffectorConfig
from soft_inverse_ros.core.mocap.motioncapture_source import MotionCaptureConfig
from soft_inverse_ros.core.mocap.registration import (
    REGISTRATION_KEY,
    FrameRegistration,
    load_registration,
)
from soft_inverse_ros.core.mocap.sample_filter import SampleFilterConfig
from soft_inverse_ros.core.mocap.simulated_source import SimulatedMocapConfig
from soft_inverse_ros.core.yaml_files import load_yaml

BACKENDS = ("motioncapture", "replay_csv", "replay_bag", "simulated")


class MocapConfigError(ValueError):
    """The mocap configuration is invalid; the message names the key."""


@dataclass(frozen=True)
class ReplayConfig:
    """Recorded mocap to replay.

    Attributes:
        path: CSV file (``replay_csv``) or bag file/directory (``replay_bag``).
        topics: Bag topic → item name (None: every PoseStamped/PointStamped topic).
        stamp_tolerance: Header-stamp spread grouped into one frame [s].
        rate: Playback speed factor for the node (1.0 = real time).
    """

    path: pathlib.Path
    topics: dict[str, str] | None = None
    stamp_tolerance: float = 0.0
    rate: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise ValueError(f"replay.rate must be a finite number > 0, got {self.rate!r}")
        if self.path.suffix.lower() == ".csv" and (self.topics is not None or self.stamp_tolerance):
            raise ValueError("replay.topics and replay.stamp_tolerance apply to a bag, not to a CSV "
                             f"({self.path.name})")


@dataclass(frozen=True)
class MocapConfig:
    """Everything the mocap node needs (see the module docstring)."""

    backend: str
    registration: FrameRegistration
    filter: SampleFilterConfig = field(default_factory=SampleFilterConfig)
    effector: EffectorConfig | None = None
    motioncapture: MotionCaptureConfig | None = None
    replay: ReplayConfig | None = None
    simulated: SimulatedMocapConfig | None = None

    @property
    def robot_frame(self) -> str:
        return self.registration.parent_frame


def _scalar_type_problem(hint: Any, value: Any) -> str | None:
    """What a value given for a field annotated ``hint`` should have been (``a number``, ``true
    or false``, ...), or None when it fits (or the field is not a plain scalar). A bool is not
    a number here, and a string is not a bool ("false" would be true)."""
    if hint is bool and not isinstance(value, bool):
        return "true or false"
    if hint is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return "a number (SI units, no unit string)"
    if hint is int and (isinstance(value, bool) or not isinstance(value, int)):
        return "a whole number"
    if hint is str and not isinstance(value, str):
        return "a string"
    return None


def _section(cls: type, data: Any, where: str, **overrides: Any):
    """Build dataclass ``cls`` from a mapping, naming ``where`` in every error."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise MocapConfigError(f"{where} must be a mapping, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise MocapConfigError(f"{where}: unknown keys {unknown} (expected some of {sorted(names)})")
    hints = typing.get_type_hints(cls)
    for key, value in data.items():
        problem = _scalar_type_problem(hints.get(key), value)
        if problem:
            raise MocapConfigError(f"{where}.{key} must be {problem}, got {value!r}")
    kwargs = dict(data)
    kwargs.update(overrides)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise MocapConfigError(f"{where}: {exc}") from exc
    except ValueError as exc:
        raise MocapConfigError(f"{where}: {exc}") from exc


def _registration(value: Any, robot_frame: str | None, base: pathlib.Path) -> FrameRegistration:
    if value is None:
        reg = FrameRegistration.identity(robot_frame or "base_link")
    elif isinstance(value, (str, pathlib.Path)):
        path = pathlib.Path(value)
        if not path.is_absolute():
            path = base / path
        try:
            reg = load_registration(path)
        except (OSError, ValueError) as exc:
            raise MocapConfigError(f"mocap.registration: {exc}") from exc
    else:
        try:
            reg = FrameRegistration.from_dict(value, where="mocap.registration")
        except ValueError as exc:
            raise MocapConfigError(str(exc)) from exc
    if robot_frame is not None and reg.parent_frame != robot_frame:
        raise MocapConfigError(
            f"mocap.robot_frame is {robot_frame!r} but the registration maps into "
            f"{reg.parent_frame!r}"
        )
    return reg


def mocap_config_from_dict(data: dict, base_dir: str | pathlib.Path = ".") -> MocapConfig:
    """Validate the value of the ``mocap`` key; relative paths resolve against ``base_dir``."""
    base = pathlib.Path(base_dir)
    if not isinstance(data, dict):
        raise MocapConfigError("mocap must be a mapping")
    known = {"backend", "robot_frame", "registration", "filter", "effector", "motioncapture",
             "replay", "simulated"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise MocapConfigError(f"mocap: unknown keys {unknown} (expected some of {sorted(known)})")
    backend = data.get("backend")
    if backend not in BACKENDS:
        raise MocapConfigError(f"mocap.backend must be one of {BACKENDS}, got {backend!r}")
    registration = _registration(data.get("registration"), data.get("robot_frame"), base)
    filt = _section(SampleFilterConfig, data.get("filter"), "mocap.filter")
    effector = None
    if data.get("effector") is not None:
        eff = dict(data["effector"]) if isinstance(data["effector"], dict) else data["effector"]
        if isinstance(eff, dict):
            for key in ("offset", "markers", "initial_position"):
                if isinstance(eff.get(key), list):
                    eff[key] = tuple(eff[key])
        effector = _section(EffectorConfig, eff, "mocap.effector")
    sections: dict[str, Any] = {}
    for key, cls in (("motioncapture", MotionCaptureConfig), ("simulated", SimulatedMocapConfig)):
        if data.get(key) is not None or backend == key:
            sections[key] = _section(cls, data.get(key), f"mocap.{key}")
    if data.get("replay") is not None or backend.startswith("replay"):
        replay = data.get("replay") or {}
        if not isinstance(replay, dict) or "path" not in replay:
            raise MocapConfigError("mocap.replay.path is required for a replay backend")
        path = pathlib.Path(replay["path"])
        sections["replay"] = _section(
            ReplayConfig, replay, "mocap.replay", path=path if path.is_absolute() else base / path
        )
    problem = noise_filter_problem(sections.get("simulated"), filt)
    if problem:
        raise MocapConfigError(f"mocap.simulated.noise_std: {problem}")
    return MocapConfig(
        backend=backend, registration=registration, filter=filt, effector=effector, **sections
    )


#: the filter's max_jump must exceed this many noise standard deviations (two samples'
#: difference has √6 σ of 3-D norm on average: at 10 σ nearly no noisy sample is rejected)
NOISE_TO_JUMP = 10.0


def noise_filter_problem(simulated, filt: SampleFilterConfig) -> str:
    """Why a simulated source's noise cannot pass the sample filter ("" when it can): a noise
    the filter's ``max_jump`` would reject most samples of (a noise in mm written as m)."""
    if simulated is None or not simulated.noise_std * NOISE_TO_JUMP > filt.max_jump:
        return ""
    return (f"{simulated.noise_std:g} m per axis against filter.max_jump {filt.max_jump:g} m: the filter "
            f"would reject most samples (max_jump must exceed {NOISE_TO_JUMP:g} x noise_std; mm written as m?)")


def load_mocap_config(path: str | pathlib.Path) -> MocapConfig:
    """Read the ``mocap`` block of a YAML file (its own file or a robot configuration).

    When the file has no ``registration`` entry under ``mocap`` but a top-level
    ``mocap_registration`` block (as ``register-frames --robot`` writes), that is used.
    """
    import yaml

    from soft_inverse_ros.core.yaml_files import yaml_problem

    path = pathlib.Path(path)
    try:
        data = load_yaml(path.read_text())
    except yaml.YAMLError as exc:
        raise MocapConfigError(f"{path}: not YAML ({yaml_problem(exc)})") from None
    if not isinstance(data, dict) or "mocap" not in data:
        raise MocapConfigError(f"{path} has no top-level 'mocap' key")
    block = dict(data["mocap"] or {})
    if "registration" not in block and REGISTRATION_KEY in data:
        block["registration"] = data[REGISTRATION_KEY]
    return mocap_config_from_dict(block, base_dir=path.parent)


def check_written_registration(path: str | pathlib.Path, written: FrameRegistration) -> None:
    """Raise :class:`MocapConfigError` unless loading ``path`` as its reader does yields
    ``written`` (what ``register-frames --config`` wrote into it): a file with a ``mocap``
    block through :func:`load_mocap_config` (which also checks ``mocap.robot_frame``
    against the registration's frame), any other (a robot description) through
    :func:`load_registration`."""
    path = pathlib.Path(path)
    data = load_yaml(path.read_text())
    if isinstance(data, dict) and "mocap" in data:
        loaded = load_mocap_config(path).registration
    else:
        loaded = load_registration(path)
    same = (loaded.parent_frame == written.parent_frame and loaded.n_points == written.n_points
            and np.allclose(loaded.transform.translation, written.transform.translation, atol=1e-6)
            and np.allclose(loaded.transform.rotation, written.transform.rotation, atol=1e-6))
    if not same:
        raise MocapConfigError(f"the loader reads another registration than the one written "
                               f"({loaded.n_points} points into {loaded.parent_frame!r})")


#: source config per mocap_node backend when ``source_config`` is empty (under config/)
DEFAULT_SOURCE_CONFIG = {
    "sim": "mocap_simulated.yaml",
    "motioncapture": "mocap_vicon.yaml",
    "replay": "mocap_replay.yaml",
}


def resolve_source_config(value: str, backend: str) -> pathlib.Path:
    """The mocap YAML named by mocap_node's ``source_config`` (a path, or a file under
    config/); empty: ``backend``'s default (:data:`DEFAULT_SOURCE_CONFIG`).

    Raises:
        FileNotFoundError: naming the value and every place searched.
    """
    if not value:
        if not backend:
            raise FileNotFoundError("source_config is required when backend is empty")
        return find_config(DEFAULT_SOURCE_CONFIG[backend])
    path = pathlib.Path(value).expanduser()
    if path.is_file():
        return path
    if not path.is_absolute():
        try:
            return find_config(value)
        except ConfigNotFoundError:
            pass
    places = ", ".join(str(d) for d in config_dirs())
    raise FileNotFoundError(f"source_config {value!r}: no such file (also searched {places})")
