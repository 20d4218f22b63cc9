"""Compile the main job's numba kernels into numba's on-disk cache, at set-up time.

Numba compiles a ``cache=True`` kernel on its first call and stores it next to its source
(``__pycache__/*.nbi``, ``*.nbc``; or under ``NUMBA_CACHE_DIR``); later processes load it
from there (1–2 s for the main job's kernels, against ~20 s to compile them on this
project's 2-core machine). On a fresh clone nothing is cached, so the first ``demo`` compiled the
FEM's kernels (``fem_kernels``), the block solve (``ldl_kernels``) and the solver's tick
(``tick_kernels``) inside the graph, while every other node started on the same two
cores: the controller's first command came 22–28 s after the first target (BENCHMARKS.md,
seventeenth session). ``scripts/setup.sh`` runs
:func:`warm_up_main_job` so that the first run starts like the later ones.

It runs the code paths the nodes run, not copies of them: the controller's model built and
equilibrated as ``fem_node`` does (:class:`RobotModel`), one update with its snapshot, the
block solve's warm-up (:func:`ldl_kernels.warm_up`), and :func:`warm_up_solver` with the
solver settings of the graph's parameter file (as ``inverse_controller_node`` calls it).
It also compiles the self-collision narrow phase (:func:`warm_up_contact`), which the
self-collision scene (``demo --scene self-collision``) calls, and builds the main job's
simulated robot once (:func:`warm_up_plant`) into the plant build cache
(core/sim/build_cache.py): its reduction and element sampling take ~12 s of CPU that
``plant_sim_node``, at SCHED_FIFO, would otherwise spend while the graph starts.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from soft_inverse_ros.core.control.shipped_settings import controller_params, solver_config_from_params

__all__ = ["warm_up_main_job", "solver_config_from_params"]


def warm_up_main_job(robot: str = "builtin_diamond", params_file: str | Path | None = None
                     ) -> dict[str, float]:
    """Compile (or load) every numba kernel the main job's nodes call; the wall time of
    each part [s]. ``params_file``: the graph's parameter file (default: the shipped
    ``config/sim.yaml``).

    Raises:
        DescriptionError, ConfigNotFoundError: ``robot`` does not load (as the nodes would).
    """
    from soft_inverse_ros.core.control.actuator_limits import limits_from_description
    from soft_inverse_ros.core.control.kernel_warm_up import warm_up_solver
    from soft_inverse_ros.core.model import ldl_kernels
    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.core.model.robot_model import RobotModel
    from soft_inverse_ros.core.config_files import find_config

    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    ldl_kernels.warm_up()
    seconds["block_solve"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    description = load_robot_description(robot)
    model = RobotModel.from_description(description)
    model.equilibrate(np.zeros(model.n_actuators), from_rest=True)
    model.update(np.zeros(model.n_actuators), seq=1, stamp=0.0)
    seconds["fem"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    path = Path(params_file) if params_file is not None else find_config("sim.yaml")
    config = solver_config_from_params(controller_params(path))
    warm_up_solver(config, limits_from_description(description), description.actuator_kinds,
                   description.effector_row_names)
    seconds["solver"] = time.perf_counter() - t0
    return seconds


def main(argv: list[str] | None = None) -> int:
    """``python -m soft_inverse_ros.core.jit_warm_up``: what ``scripts/setup.sh`` runs.
    With ``--plant-of GRAPH [name:=value ...]``: only build (or load) that graph's simulated
    robot into the plant build cache (:func:`prebuild_graph_plant`), what ``ros2 launch``
    runs before it starts the graph's nodes (launch_support.py)."""
    import argparse
    import importlib.util
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m soft_inverse_ros.core.jit_warm_up",
        description="Compile the main job's numba kernels and build its simulated robot into the "
                    "plant build cache (what scripts/setup.sh runs). With --plant-of GRAPH "
                    "name:=value ...: only build (or load) that graph's simulated robot, what "
                    "ros2 launch runs before it starts the graph's nodes.")
    parser.add_argument("--plant-of", metavar="GRAPH",
                        help="only prepare this graph's simulated robot (graph arguments follow)")
    parser.add_argument("arguments", nargs="*", metavar="name:=value")
    args = parser.parse_args(argv)
    if args.plant_of is not None:
        return _prebuild_for_launch(args.plant_of, args.arguments)
    if args.arguments:
        parser.error("graph arguments need --plant-of")
    if importlib.util.find_spec("numba") is None:  # the kernels then run as numpy
        print("numba is not installed: nothing to compile")
        return 0
    seconds = warm_up_main_job()
    seconds["contact"] = warm_up_contact()
    seconds["plant"] = warm_up_plant()
    print("numba kernels of the main job compiled or loaded, its simulated robot built: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()))
    sys.stdout.flush()
    return 0


#: exit status of an interrupted plant preparation (the shell's 128 + SIGINT)
PREBUILD_INTERRUPTED = 130


def _prebuild_for_launch(graph: str, assignments: list[str]) -> int:
    """Prepare ``graph``'s simulated robot with the graph's arguments (``name:=value``):
    0 when done or when there is nothing to prepare or it cannot be built (the node then
    reports why), 2 for arguments the graph does not take, :data:`PREBUILD_INTERRUPTED` on
    Ctrl-C."""
    import sys

    from soft_inverse_ros.graph import build_graph, parse_graph_arguments

    try:
        specs = build_graph(graph, parse_graph_arguments(assignments))
    except (KeyError, ValueError, FileNotFoundError) as exc:
        print(f"plant preparation: {exc}", file=sys.stderr)
        return 2
    try:
        prebuild_graph_plant(specs, lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print("interrupted while preparing the simulated robot", flush=True)
        return PREBUILD_INTERRUPTED
    return 0


def _plant_to_prebuild(specs):
    """The PlantConfig of these node specs' ``plant_sim_node`` when its plant keeps a build
    (:func:`keeps_a_build`), else None (no such node, a plant with nothing to keep, or one
    that cannot be configured: the node reports that)."""
    spec = next((s for s in specs if s.name == "plant_sim_node"), None)
    if spec is None:
        return None
    try:
        config = plant_config_of_spec(spec.params_files, spec.parameters)
        return config if keeps_a_build(config) else None
    except Exception:  # noqa: BLE001 -- the node reports a plant that cannot be configured
        return None


def graph_prebuilds_a_plant(specs) -> bool:
    """Whether :func:`prebuild_graph_plant` has something to build for these node specs: a
    ``plant_sim_node`` whose plant keeps a build (:func:`keeps_a_build`)."""
    return _plant_to_prebuild(specs) is not None


def plant_config_from_params(params_file: str | Path = "sim.yaml", **overrides):
    """The :class:`~soft_inverse_ros.core.sim.plant.PlantConfig` that ``plant_sim_node``
    builds from a graph's parameter file (its ``plant_sim_node`` section's keys that are
    PlantConfig fields; lists become tuples as the node's parameters do; a path, or a name
    in the package's config folders), then ``overrides`` (what the graph passes the node,
    e.g. ``robot``, ``model``)."""
    return _plant_config((params_file,), overrides)


def _plant_fields() -> set[str]:
    from dataclasses import fields

    from soft_inverse_ros.core.sim.plant import PlantConfig

    return {f.name for f in fields(PlantConfig) if f.init}


def _plant_config(params_files, overrides):
    """PlantConfig from the files' ``plant_sim_node`` sections (their PlantConfig keys, in
    order, lists as tuples), then ``overrides`` as they are."""
    from soft_inverse_ros.core.control.shipped_settings import node_params
    from soft_inverse_ros.core.sim.plant import PlantConfig

    names = _plant_fields()
    values: dict = {}
    for params_file in params_files:
        values.update({key: tuple(v) if isinstance(v, list) else v
                       for key, v in node_params(params_file, "plant_sim_node").items() if key in names})
    values.update(overrides)
    return PlantConfig(**values)


def keeps_a_build(config) -> bool:
    """Whether the plant of ``config`` (a PlantConfig) has a reduction for the build cache
    to keep (a reduced or modal plant, the cache not disabled)."""
    from soft_inverse_ros.core.sim.build_cache import cache_dir

    return config.model in ("reduced", "modal") and cache_dir() is not None


def build_plant_ahead(config):
    """Build (or load) the plant of ``config`` (a PlantConfig: :func:`plant_config_from_params`)
    so that its reduction is in the build cache when ``plant_sim_node`` starts
    (core/sim/build_cache.py). The plant, or None when there is nothing to keep
    (:func:`keeps_a_build`)."""
    from soft_inverse_ros.core.sim.plant import make_plant

    return make_plant(config) if keeps_a_build(config) else None


def plant_config_of_spec(params_files, parameters):
    """The PlantConfig a ``plant_sim_node`` started with these parameter files (applied in
    order) and node parameters builds: :func:`plant_config_from_params` over several files,
    with the parameters that are PlantConfig fields as overrides (lists as tuples)."""
    names = _plant_fields()
    return _plant_config(params_files, {key: tuple(v) if isinstance(v, list) else v
                                        for key, v in parameters.items() if key in names})


def prebuild_graph_plant(specs, say) -> None:
    """Build the simulated robot of a graph (its ``plant_sim_node`` spec, if any) into the
    plant build cache before the graph starts, at normal priority: a robot met for the first
    time, or after the core code changed, would otherwise be built by ``plant_sim_node`` at
    SCHED_FIFO inside the starting graph (13.8–16.6 s here), starving ``fem_node`` until
    the controller went SAFE on stale snapshots (``demo --robot diamond``; the first
    condition of ``experiment distributed`` after a code change). Loaded in ~1 s when
    cached. ``say`` gets one line before and one after; a plant that cannot be built is
    left to the node, which reports it."""
    config = _plant_to_prebuild(specs)
    if config is None:
        return
    try:
        from soft_inverse_ros.core.sim.build_cache import cache_dir

        say("preparing the simulated robot's reduced model ...")
        t0 = time.monotonic()
        plant = build_plant_ahead(config)
    except Exception:  # noqa: BLE001 -- the node builds it again and reports what is wrong
        return
    how = ("loaded from the build cache" if plant.from_cache else
           f"built (once for this robot and code; kept in {cache_dir()})")
    say(f"simulated robot {how} in {time.monotonic() - t0:.1f} s")


def warm_up_plant(params_file: str | Path = "sim.yaml") -> float:
    """:func:`build_plant_ahead` for the graph's parameter file; the wall time [s]."""
    t0 = time.perf_counter()
    build_plant_ahead(plant_config_from_params(params_file))
    return time.perf_counter() - t0


def warm_up_contact() -> float:
    """Compile (or load) the self-collision narrow phase and broad phase
    (core/contact/narrow_phase.py) and the small-surface step bound (core/contact/step_bound.py)
    the self-collision scene's plant and model call: 7 s to compile here, which a first
    ``demo --scene self-collision`` would otherwise spend inside the graph. The wall time [s]."""
    from soft_inverse_ros.core.contact.geometry import SelfCollision
    from soft_inverse_ros.core.model.mesh_generation import box_mesh

    t0 = time.perf_counter()
    mesh = box_mesh((0.02, 0.02, 0.002), (2, 2, 1))
    SelfCollision(mesh.boundary_faces(), mesh.points)  # its constructor runs the kernel once
    return time.perf_counter() - t0


if __name__ == "__main__":
    raise SystemExit(main())
