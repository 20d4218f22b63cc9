"""``soft-inverse-ros experiment plant-mismatch``: how far the simulated robot is from the
controller's model, statically.

The simulated robot (``plant_sim_node``) must be a different model from the one the
controller inverts, or model errors they share would be invisible. This experiment states
the difference. The plant is built exactly as the live graph builds it: the
``plant_sim_node`` section of ``config/sim.yaml`` (``--params-file``), its ``model``
(reduced by default) or ``--plant-model``. For each actuator alone:

1. the plant starts at its slack equilibrium under gravity (servos zeroed on the hanging
   robot, as in the demo) and the actuator is driven: a cable pulled ``--pull`` beyond
   slack, a cavity at ``--pressure``, a force at ``--force``; the plant's static
   equilibrium gives the effector displacement d_plant and the efforts λ it carries;
2. the controller's model (``fem_node``'s RobotModel of the description) is put under the
   same efforts λ; its effector displacement from its own zero-effort equilibrium is
   d_model.

Per actuator it reports both displacements [mm] and ``relative_difference`` =
‖d_plant − d_model‖ / ‖d_plant‖, plus the gravity-equilibrium offset of the effector
between the two models. With ``--json`` the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses

from soft_inverse_ros.cli_values import non_negative

NAME = "plant-mismatch"


def _plant_config(args: argparse.Namespace):
    from soft_inverse_ros.core.config_files import find_config
    from soft_inverse_ros.core.drivers.config_reader import read_yaml_section
    from soft_inverse_ros.core.sim.plant import PlantConfig
    from soft_inverse_ros.graph import resolve_params_file

    path = resolve_params_file(args.params_file) if args.params_file else find_config("sim.yaml")
    section = read_yaml_section(path, "plant_sim_node")["ros__parameters"]
    names = {f.name for f in dataclasses.fields(PlantConfig)}
    values = {k: v for k, v in section.items() if k in names}
    values["robot"] = args.robot
    if args.plant_model:
        values["model"] = args.plant_model
    return PlantConfig(**values), path


def measure(args: argparse.Namespace) -> dict:
    import numpy as np

    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.core.model.robot_model import RobotModel
    from soft_inverse_ros.core.model.snapshot import ActuatorKind
    from soft_inverse_ros.core.sim.plant import make_plant

    config, params_file = _plant_config(args)
    plant = make_plant(config)
    model = RobotModel.from_description(load_robot_description(args.robot))
    n = len(plant.actuator_names)
    model.equilibrate(np.zeros(n), from_rest=True)
    model_rest = np.array(model.effector_position)

    plant.equilibrate(slack_cables=True)
    plant_rest = np.array(plant.effector_position)
    slack = plant.cable_strokes.copy()
    rows = []
    for i, (name, kind) in enumerate(zip(plant.actuator_names, plant.actuator_kinds)):
        plant.reset()
        plant.set_inputs(cable_strokes=slack)
        plant.equilibrate(slack_cables=True)
        if kind is ActuatorKind.CABLE:
            strokes = slack.copy()
            strokes[list(plant.cable_names).index(name)] += args.pull
            plant.set_inputs(cable_strokes=strokes)
            drive = f"pulled {1e3 * args.pull:g} mm beyond slack"
        elif kind is ActuatorKind.PRESSURE:
            p = np.zeros(len(plant.pressure_names))
            p[list(plant.pressure_names).index(name)] = args.pressure
            plant.set_inputs(pressures=p)
            drive = f"{args.pressure:g} Pa"
        else:
            f = np.zeros(len(plant.force_names))
            f[list(plant.force_names).index(name)] = args.force
            plant.set_inputs(forces=f)
            drive = f"{args.force:g} N"
        plant.equilibrate()
        efforts = plant.efforts()
        d_plant = np.array(plant.effector_position) - plant_rest
        model.equilibrate(efforts, from_rest=True)
        d_model = np.array(model.effector_position) - model_rest
        rows.append({
            "actuator": name, "drive": drive, "efforts": efforts.tolist(),
            "plant_displacement_mm": (1e3 * d_plant).tolist(),
            "model_displacement_mm": (1e3 * d_model).tolist(),
            "relative_difference": float(np.linalg.norm(d_plant - d_model)
                                         / max(np.linalg.norm(d_plant), 1e-12)),
        })
        print(f"{name:>14} ({drive}): plant {np.round(1e3 * d_plant, 3)} mm, model "
              f"{np.round(1e3 * d_model, 3)} mm, difference "
              f"{100 * rows[-1]['relative_difference']:.1f} %", flush=True)
    diffs = [r["relative_difference"] for r in rows]
    return {
        "experiment": NAME, "robot": args.robot, "params_file": str(params_file),
        "plant": dataclasses.asdict(config),
        "plant_nodes": int(plant.mesh.n_points), "model_nodes": int(model.mesh.n_points),
        "gravity_offset_mm": (1e3 * (plant_rest - model_rest)).tolist(),
        "actuators": rows,
        "mean_relative_difference": float(np.mean(diffs)),
        "max_relative_difference": float(np.max(diffs)),
    }


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from soft_inverse_ros.experiments import common_arguments

    parser = subparsers.add_parser(
        NAME, help="static effector response of the simulated robot vs the controller's model",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="builtin_diamond", help="robot description")
    parser.add_argument("--params-file", default="",
                        help="parameter file whose plant_sim_node section builds the plant "
                             "(default config/sim.yaml)")
    parser.add_argument("--plant-model", choices=("fem", "reduced", "modal", "mujoco"), default=None,
                        help="override the plant model of the parameter file")
    parser.add_argument("--pull", type=non_negative, default=0.003,
                        help="cable pull beyond slack [m] (default 0.003)")
    parser.add_argument("--pressure", type=non_negative, default=10e3, help="cavity pressure [Pa]")
    parser.add_argument("--force", type=non_negative, default=1.0, help="force actuators [N]")
    common_arguments(parser, quick=False, fem=False)
    parser.set_defaults(func=main)
    return parser


def main(args: argparse.Namespace) -> int:
    from soft_inverse_ros.experiments import emit, limit_threads

    limit_threads()
    emit(measure(args), args, NAME)
    return 0
