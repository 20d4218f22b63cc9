"""Motion capture ingestion: sources, mocap → robot registration, hygiene, effector.

Data flow (all pure Python/numpy, no ROS)::

    source.next_frame() / simulated.poll(now)   MocapFrame, mocap frame & units
        → MocapPipeline.process(frame)           MocapEstimate, robot frame [m]
            (registration, NaN/jump/stale hygiene, effector extraction)

Modules: :mod:`.rigid_transform` (quaternions x, y, z, w; rigid transforms),
:mod:`.frame` (MocapFrame), :mod:`.registration` (rigid fit, YAML I/O),
:mod:`.sample_filter` (hygiene), :mod:`.effector` (effector position),
:mod:`.pipeline`, :mod:`.config` (YAML ``mocap`` block), :mod:`.sources` and one module
per backend (:mod:`.motioncapture_source`, :mod:`.replay_source`,
:mod:`.simulated_source`).
"""

from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
from soft_inverse_ros.core.mocap.pipeline import EffectorEstimate, MocapEstimate, MocapPipeline
from soft_inverse_ros.core.mocap.registration import (
    FrameRegistration,
    RegistrationError,
    estimate_rigid_transform,
    load_registration,
    save_registration,
)
from soft_inverse_ros.core.mocap.rigid_transform import RigidTransform

__all__ = [
    "BodyPose",
    "EffectorEstimate",
    "FrameRegistration",
    "MocapEstimate",
    "MocapFrame",
    "MocapPipeline",
    "RegistrationError",
    "RigidTransform",
    "estimate_rigid_transform",
    "load_registration",
    "save_registration",
]
