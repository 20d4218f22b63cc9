"""The mocap YAML configuration, the shipped examples, and effector extraction modes."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest
import yaml

from soft_inverse_ros.cli import main
from soft_inverse_ros.core.mocap.config import (
    MocapConfigError,
    load_mocap_config,
    mocap_config_from_dict,
)
from soft_inverse_ros.core.mocap.effector import EffectorConfig, EffectorExtractor
from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
from soft_inverse_ros.core.mocap.pipeline import MocapPipeline
from soft_inverse_ros.core.mocap.rigid_transform import rotation_vector_to_quaternion
from soft_inverse_ros.core.mocap.simulated_source import SimulatedMocapSource
from soft_inverse_ros.core.mocap.sources import open_source

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "config"
EXAMPLES = sorted(CONFIG.glob("mocap*.yaml"))


def test_examples_exist():
    assert {p.name for p in EXAMPLES} >= {"mocap_vicon.yaml", "mocap_simulated.yaml",
                                          "mocap_replay.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_load_and_build_a_pipeline(path):
    config = load_mocap_config(path)
    pipeline = MocapPipeline.from_config(config)
    assert pipeline.robot_frame == "base_link"
    # every example tracks an effector, except the snake's, which tracks its plates as
    # rigid bodies (mocap_node's rigid_bodies, config/sim_snake.yaml)
    assert (config.effector is None) == (path.name == "mocap_snake.yaml")
    if config.backend == "simulated":
        assert isinstance(open_source(config), SimulatedMocapSource)
    if config.backend.startswith("replay"):
        assert config.replay.path.is_absolute()
        with pytest.raises(FileNotFoundError):  # the example recording is not shipped
            open_source(config)


def test_register_frames_updates_the_config_the_loader_reads(tmp_path):
    cfg = tmp_path / "mocap_vicon.yaml"
    shutil.copy(CONFIG / "mocap_vicon.yaml", cfg)
    assert load_mocap_config(cfg).registration.n_points == 0  # not calibrated yet
    rng = np.random.default_rng(0)
    robot = 0.1 * rng.standard_normal((6, 3))
    mocap = robot - np.array([1.0, 2.0, 0.5])  # mocap origin offset, same axes
    lines = ["mocap_x,mocap_y,mocap_z,robot_x,robot_y,robot_z"]
    lines += [",".join(f"{float(v):.12g}" for v in (*m, *r)) for m, r in zip(mocap, robot)]
    (tmp_path / "pairs.csv").write_text("\n".join(lines) + "\n")
    assert main(["register-frames", str(tmp_path / "pairs.csv"), "--robot", str(cfg)]) == 0
    config = load_mocap_config(cfg)
    assert config.registration.n_points == 6
    assert np.allclose(config.registration.transform.translation, [1.0, 2.0, 0.5])
    assert config.motioncapture.system == "vicon"  # the rest of the file survived
    est = MocapPipeline.from_config(config).process(
        MocapFrame(0.0, labeled_markers={"m": mocap[0]})
    )
    assert est.frame.frame_id == "base_link"


def base(**over):
    data = {"backend": "simulated", "effector": {"mode": "labeled_marker", "name": "tip"}}
    data.update(over)
    return data


@pytest.mark.parametrize(
    "data, key",
    [
        (base(backend="kinect"), "mocap.backend"),
        (base(filter={"max_jump": -1}), "filter.max_jump"),
        (base(filter={"max_jmp": 0.01}), "mocap.filter: unknown keys"),
        (base(effector={"mode": "rigid_body"}), "effector.name"),
        (base(effector={"mode": "nearest_marker"}), "effector.initial_position"),
        (base(simulated={"dropout_probability": 2}), "simulated.dropout_probability"),
        (base(backend="replay_bag"), "mocap.replay.path"),
        (base(registration={"translation": [0, 0], "rotation_xyzw": [0, 0, 0, 1]}),
         "mocap.registration.translation"),
        (base(robot_frame="world", registration={"translation": [0, 0, 0],
                                                 "rotation_xyzw": [0, 0, 0, 1]}),
         "mocap.robot_frame"),
        (base(extra=1), "mocap: unknown keys"),
        (base(backend="motioncapture", motioncapture={"system": "vicon", "latency": -1}),
         "motioncapture.latency"),
        # a value of the wrong type names its key (it was a numpy TypeError, or silently true)
        (base(simulated={"seed": 1.5}), "simulated.seed must be a whole number, got 1.5"),
        (base(simulated={"labeled": "false"}), "simulated.labeled must be true or false, got 'false'"),
        (base(simulated={"noise_std": "0.2 mm"}), "simulated.noise_std must be a number"),
        (base(simulated={"dropout_probability": "2 %"}), "simulated.dropout_probability must be a number"),
        (base(filter={"max_jump": None}), "filter.max_jump must be a number"),
        # a noise in mm written as m: the filter would reject nearly every sample
        (base(simulated={"noise_std": 0.2}), "simulated.noise_std: 0.2 m per axis against filter.max_jump"),
    ],
)
def test_config_errors_name_the_key(data, key):
    with pytest.raises(MocapConfigError, match=key.replace(".", r"\.")):
        mocap_config_from_dict(data)


def test_registration_file_path_is_relative_to_the_config(tmp_path):
    (tmp_path / "reg.yaml").write_text(yaml.safe_dump({"mocap_registration": {
        "translation": [0.1, 0, 0], "rotation_xyzw": [0, 0, 0, 1], "parent_frame": "base_link"}}))
    config = mocap_config_from_dict(base(registration="reg.yaml"), base_dir=tmp_path)
    assert np.allclose(config.registration.transform.translation, [0.1, 0, 0])
    with pytest.raises(MocapConfigError, match="mocap.registration"):
        mocap_config_from_dict(base(registration="missing.yaml"), base_dir=tmp_path)


def frame_with_everything():
    q = rotation_vector_to_quaternion([0.0, 0.0, np.pi / 2])  # 90° about z
    return MocapFrame(
        1.0,
        bodies={"plate": BodyPose([0.1, 0.2, 0.3], q)},
        labeled_markers={"a": [0.0, 0.0, 0.1], "b": [0.02, 0.0, 0.1], "c": [0.01, 0.03, 0.1]},
        markers=[[0.5, 0.5, 0.5], [0.101, 0.0, 0.2], [0.099, 0.002, 0.2], [0.3, 0.0, 0.2]],
        frame_id="base_link",
    )


def test_effector_modes():
    frame = frame_with_everything()

    def extract(previous=None, **cfg):
        return EffectorExtractor(EffectorConfig(**cfg)).extract(frame, previous)

    # The body-frame offset x is rotated onto the robot's y by the body's 90° yaw.
    assert np.allclose(extract(mode="rigid_body", name="plate", offset=(0.01, 0, 0)),
                       [0.1, 0.21, 0.3])
    assert extract(mode="rigid_body", name="other") is None
    assert np.allclose(extract(mode="labeled_marker", name="b"), [0.02, 0.0, 0.1])
    assert np.allclose(extract(mode="marker_centroid", markers=("a", "b", "c")),
                       [0.01, 0.01, 0.1])
    assert extract(mode="marker_centroid", markers=("a", "z")) is None
    assert np.allclose(extract(mode="marker_centroid", markers=("a", "z"), min_markers=1),
                       [0.0, 0.0, 0.1])
    near = dict(initial_position=(0.1, 0.0, 0.2), gate_radius=0.01)
    assert np.allclose(extract(mode="nearest_marker", **near), [0.101, 0.0, 0.2])
    # The previous estimate, when given, replaces the initial position.
    assert np.allclose(extract(np.array([0.0985, 0.0025, 0.2]), mode="nearest_marker", **near),
                       [0.099, 0.002, 0.2])
    assert extract(np.array([1.0, 1.0, 1.0]), mode="nearest_marker", **near) is None
    assert np.allclose(extract(mode="marker_centroid", **near), [0.1, 0.001, 0.2])


def test_a_file_that_is_not_yaml_is_one_line(tmp_path):
    from soft_inverse_ros.core.drivers.config_reader import DriverConfigError, read_yaml_section

    path = tmp_path / "bad.yaml"
    path.write_text("mocap: [1, 2\n")
    with pytest.raises(MocapConfigError, match=r"bad.yaml: not YAML \(expected ',' or '\]', but got '<stream end>' at line 2, column 1\)"):
        load_mocap_config(path)
    with pytest.raises(DriverConfigError, match=r"bad.yaml: not YAML \(expected ',' or '\]'"):
        read_yaml_section(path, "servo")
