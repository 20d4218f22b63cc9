"""What a graph's nodes would refuse only once started, checked before any starts: by
``soft-inverse-ros launch`` (also ``--dry-run``) and by the launch files (``ros2 launch``),
so both refuse the same inputs in one line."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

from soft_inverse_ros.graph import NodeSpec, resolve_params_file


def _file_parameter(spec: NodeSpec, key: str) -> Any:
    """The value of ``key`` for node ``spec`` in its parameters files (the last that sets
    it), or None."""
    from soft_inverse_ros.core.yaml_files import load_yaml
    from soft_inverse_ros.nodes.node_runtime import file_parameters

    value = None
    for name in spec.params_files:
        data = load_yaml(resolve_params_file(name).read_text(encoding="utf-8"))
        value = file_parameters(data, f"/{spec.name}").get(key, value)
    return value


def _check_recording(output: str) -> None:
    """A bag folder the recorder can make: not there yet (it never overwrites), under a
    folder (not a file) that this user may write."""
    path = Path(output).expanduser().resolve()
    if path.exists():
        raise ValueError(f"record {output!r}: {path} exists already (the recorder never overwrites a bag): "
                         "name a new folder")
    existing = next(p for p in path.parents if p.exists())
    if not existing.is_dir():
        raise ValueError(f"record {output!r}: {existing} is a file, not a folder")
    try:  # permissions, a read-only mount, a pseudo file system: only making one tells
        os.rmdir(tempfile.mkdtemp(prefix=".soft_inverse_ros_check_", dir=existing))
    except OSError as exc:
        raise ValueError(f"record {output!r}: cannot create a folder in {existing} "
                         f"({exc.strerror or exc})") from None


def check_graph_inputs(nodes: Sequence[NodeSpec]) -> None:
    """Refuse (ValueError, FileNotFoundError) what the nodes would refuse only once started:
    a parameters file rcl cannot read (node_runtime.params_file_problem), a robot
    description that does not exist, a plant model or trajectory that is not one (a CSV
    trajectory without target_node's ``csv_file``), a recording folder that exists already
    or cannot be made, and a driver's or motion capture's configuration file (``servos:=``,
    ``valves:=``, ``mocap:=``) that is missing or invalid (read as the node reads it; its
    device itself is opened only by the node)."""
    from soft_inverse_ros.core.config_files import resolve_robot
    from soft_inverse_ros.core.control.trajectory import SHAPES
    from soft_inverse_ros.core.drivers.config_reader import read_driver_section, resolve_device_config
    from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig
    from soft_inverse_ros.core.drivers.valve_config import ValveDriverConfig
    from soft_inverse_ros.core.mocap.config import load_mocap_config, resolve_source_config
    from soft_inverse_ros.core.sim.plant import PLANT_MODELS
    from soft_inverse_ros.nodes.node_runtime import params_file_problem

    for name in sorted({f for spec in nodes for f in spec.params_files}):
        problem = params_file_problem(["--ros-args", "--params-file", str(resolve_params_file(name))])
        if problem is not None:
            raise ValueError(problem)
    for robot in sorted({str(spec.parameters["robot"]) for spec in nodes if spec.parameters.get("robot")}):
        resolve_robot(robot)
    for spec in nodes:
        given = spec.parameters
        if spec.executable == "plant_sim_node" and given.get("model") and given["model"] not in PLANT_MODELS:
            raise ValueError(f"plant_model {given['model']!r} is not one of {list(PLANT_MODELS)}")
        if spec.executable == "target_node" and given.get("trajectory"):
            if given["trajectory"] not in SHAPES:
                raise ValueError(f"trajectory {given['trajectory']!r} is not one of {list(SHAPES)}")
            if given["trajectory"] == "csv" and not _file_parameter(spec, "csv_file"):
                raise ValueError("trajectory:=csv needs target_node's csv_file: set it in the parameters "
                                 f"file (params_file:=..., now {', '.join(spec.params_files)})")
        driver = {"servo_driver_node": ("servo_driver", ServoDriverConfig),
                  "valve_driver_node": ("valve_driver", ValveDriverConfig)}.get(spec.executable)
        if driver is not None and given.get("device_config"):
            path = resolve_device_config(str(given["device_config"]), "")
            try:
                driver[1].from_mapping(read_driver_section(path, driver[0], given.get("backend") or None))
            except ValueError as exc:
                raise ValueError(f"{spec.name}: device_config {path}: {exc}") from None
        if spec.executable == "mocap_node" and given.get("source_config"):
            path = resolve_source_config(str(given["source_config"]), str(given.get("backend", "")))
            try:
                load_mocap_config(path)
            except ValueError as exc:
                raise ValueError(f"{spec.name}: source_config {path}: {exc}") from None
        if spec.executable == "recorder_node" and given.get("output"):
            _check_recording(str(given["output"]))
