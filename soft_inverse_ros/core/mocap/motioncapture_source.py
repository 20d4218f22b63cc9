"""Live mocap through the multi-vendor ``motioncapture`` package (libmotioncapture).

``motioncapture.connect(system, cfg)`` supports vicon, optitrack, qualisys, vrpn, nokov,
... and a ``mock`` system that replays fixed rigid bodies (``cfg["rigid_bodies"] =
"name(x,y,z,qw,qx,qy,qz);..."``). libmotioncapture reports metres and Eigen quaternions
(read here through their x, y, z, w attributes), in the mocap frame.

The installed binding (1.1) exposes ``rigidBodies`` only; when a client also exposes a
``pointCloud`` (newer bindings) its rows are read as unlabeled markers. Frames are
stamped on the receiving clock minus the configured ``latency`` [s], since the binding
gives neither timestamps nor latency estimates.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame


@dataclass(frozen=True)
class MotionCaptureConfig:
    """Connection to a mocap system.

    Attributes:
        system: libmotioncapture type (``vicon``, ``optitrack``, ``qualisys``, ``vrpn``,
            ``mock``, ...).
        hostname: Host of the mocap server (ignored by ``mock``).
        options: Extra string options passed to ``motioncapture.connect`` (e.g. ``port``,
            ``rigid_bodies`` for ``mock``).
        latency: Known transport + processing latency subtracted from the receive time [s].
        connect_timeout: Longest wait for ``motioncapture.connect`` [s] (it blocks, and
            ignores signals, while a server does not answer).
    """

    system: str = "mock"
    hostname: str = "localhost"
    options: dict[str, str] = field(default_factory=dict)
    latency: float = 0.0
    connect_timeout: float = 10.0

    def __post_init__(self) -> None:
        if not self.system:
            raise ValueError("motioncapture.system must name a mocap system (e.g. vicon)")
        if not (np.isfinite(self.latency) and self.latency >= 0):
            raise ValueError(f"motioncapture.latency must be ≥ 0 s, got {self.latency!r}")
        if not (np.isfinite(self.connect_timeout) and self.connect_timeout > 0):
            raise ValueError(
                f"motioncapture.connect_timeout must be > 0 s, got {self.connect_timeout!r}")
        object.__setattr__(
            self, "options", {str(k): str(v) for k, v in dict(self.options).items()}
        )

    def connect_options(self) -> dict[str, str]:
        opts = {"hostname": self.hostname}
        opts.update(self.options)
        return opts


#: the connection probe run in a child process (see :func:`_probe_connection`)
_PROBE = "import json, sys, motioncapture; motioncapture.connect(sys.argv[1], json.loads(sys.argv[2]))"


def _probe_connection(config: MotionCaptureConfig) -> None:
    """Connect once in a child process, killed after ``connect_timeout``: libmotioncapture's
    ``connect`` blocks while holding the interpreter's lock (an unreachable Vicon host hung
    the node for good, deaf to SIGINT), so a timeout in this process cannot stop it.

    Raises:
        ConnectionError: no answer in time, or the child could not connect.
    """
    import json
    import subprocess
    import sys

    where = f"{config.system!r} at {config.hostname!r}"
    try:
        run = subprocess.run([sys.executable, "-c", _PROBE, config.system, json.dumps(config.connect_options())],
                             capture_output=True, text=True, timeout=config.connect_timeout)
    except subprocess.TimeoutExpired:
        raise ConnectionError(f"motioncapture: no answer from {where} within "
                              f"{config.connect_timeout:g} s (connect_timeout)") from None
    if run.returncode != 0:
        said = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[-1]
        raise ConnectionError(f"motioncapture could not connect to {where}: {said}")


def _connect(config: MotionCaptureConfig) -> Any:
    """``motioncapture.connect``, first probed in a child process for a real system
    (:func:`_probe_connection`), then in a helper thread given up after ``connect_timeout``.

    Raises:
        ConnectionError: the server refused, or did not answer in time (the blocked
            thread is left behind as a daemon; the caller exits or retries).
    """
    import motioncapture

    if config.system != "mock":
        _probe_connection(config)
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["client"] = motioncapture.connect(config.system, config.connect_options())
        except Exception as exc:  # noqa: BLE001 -- reported to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=attempt, name="motioncapture-connect", daemon=True)
    thread.start()
    thread.join(config.connect_timeout)
    where = f"{config.system!r} at {config.hostname!r}"
    if thread.is_alive():
        raise ConnectionError(
            f"motioncapture: no answer from {where} within {config.connect_timeout:g} s")
    if "error" in outcome:
        raise ConnectionError(f"motioncapture could not connect to {where}: "
                              f"{outcome['error']}") from outcome["error"]
    return outcome["client"]


def frame_from_client(client: Any, stamp: float) -> MocapFrame:
    """Read the current frame of a connected ``motioncapture`` client (mocap frame)."""
    bodies = {}
    for name, rb in client.rigidBodies.items():
        if getattr(rb, "occluded", False):
            continue
        rot = rb.rotation
        bodies[str(name)] = BodyPose(
            np.asarray(rb.position, dtype=float), np.array([rot.x, rot.y, rot.z, rot.w], float)
        )
    markers = np.zeros((0, 3))
    cloud = getattr(client, "pointCloud", None)
    if cloud is not None:
        cloud = np.asarray(cloud, dtype=float)
        if cloud.size:
            markers = cloud.reshape(-1, 3)
    return MocapFrame(stamp=stamp, bodies=bodies, markers=markers)


class MotionCaptureSource:
    """Blocking frame source over a ``motioncapture`` client.

    Args:
        config: Connection settings.
        clock: Time source [s] used to stamp frames (the node passes its ROS clock).
        client: An already connected client (tests); connects from ``config`` when None.
    """

    def __init__(
        self,
        config: MotionCaptureConfig,
        clock: Callable[[], float] = time.monotonic,
        client: Any = None,
    ) -> None:
        self.config = config
        self.clock = clock
        if client is None:
            client = _connect(config)
        self.client = client
        self.frames_read = 0

    def next_frame(self) -> MocapFrame:
        """Wait for the next mocap frame and return it (mocap frame, metres)."""
        self.client.waitForNextFrame()
        stamp = self.clock() - self.config.latency
        self.frames_read += 1
        return frame_from_client(self.client, stamp)


def mock_rigid_bodies_option(bodies: dict[str, BodyPose]) -> str:
    """Format poses as the ``rigid_bodies`` option of the ``mock`` system.

    The mock takes ``name(x,y,z,qw,qx,qy,qz)`` entries separated by ``;`` (w first).
    """
    parts = []
    for name, pose in bodies.items():
        if "(" in name or ";" in name:
            raise ValueError(f"mock rigid body name {name!r} may not contain '(' or ';'")
        qx, qy, qz, qw = pose.orientation
        values = (*pose.position, qw, qx, qy, qz)
        parts.append(f"{name}(" + ",".join(f"{float(v):.9g}" for v in values) + ")")
    return ";".join(parts)
