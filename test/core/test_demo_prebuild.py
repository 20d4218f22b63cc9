"""The commands that start a graph (``demo``, ``launch``, ``bench pipeline``, ``experiment
distributed``) build its simulated robot's reduced model into the plant build cache first
(core/jit_warm_up.prebuild_graph_plant, from the graph's ``plant_sim_node`` spec): once,
then loaded, a line saying which; nothing for a full-FEM plant or a graph without one; a
robot that cannot be built is left to the node, which reports it; Ctrl-C while it builds
is one line and exit status 130 (``launch``)."""

from __future__ import annotations

import argparse

import pytest

from soft_inverse_ros.core.jit_warm_up import prebuild_graph_plant
from soft_inverse_ros.core.sim import build_cache
from soft_inverse_ros.graph import build_graph

PARAMS = """plant_sim_node:
  ros__parameters:
    model: modal
    mesh_cell_size: 0.011
    dt: 0.01
"""


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(build_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / "plants"


def _specs(params, **overrides):
    return build_graph("sim", {"robot": "builtin_diamond", "params_file": str(params), **overrides})


def test_built_once_then_loaded(cache, tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text(PARAMS)
    lines: list[str] = []
    prebuild_graph_plant(_specs(params), lines.append)
    assert lines[0].startswith("preparing the simulated robot")
    assert lines[-1].startswith("simulated robot built (once for this robot and code")
    assert len(list(cache.glob("modal_plant-*.npz"))) == 1
    lines.clear()
    prebuild_graph_plant(_specs(params), lines.append)
    assert lines[-1].startswith("simulated robot loaded from the build cache")
    assert len(list(cache.glob("*.npz"))) == 1


def test_full_fem_unbuildable_robots_and_graphs_without_a_plant_are_left_alone(cache, tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text(PARAMS)
    lines: list[str] = []
    prebuild_graph_plant(_specs(params, plant_model="fem"), lines.append)
    assert lines == []  # a full FEM has nothing to build ahead
    prebuild_graph_plant(_specs(params, robot="no_such_robot"), lines.append)
    assert not [line for line in lines if not line.startswith("preparing")]
    prebuild_graph_plant(build_graph("hardware", {"servos": "drivers/servo_sim.yaml"}), lines.append)  # no plant
    assert not [line for line in lines if not line.startswith("preparing")]
    assert not cache.exists()


def test_ctrl_c_while_launch_builds_is_one_line(cache, tmp_path, capsys, monkeypatch):
    from soft_inverse_ros.commands import launch
    from soft_inverse_ros.core.sim import plant as plant_module

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(plant_module, "make_plant", interrupted)
    params = tmp_path / "p.yaml"
    params.write_text(PARAMS)
    args = argparse.Namespace(graph="sim", arguments=[f"params_file:={params}"], list=False,
                              dry_run=False, duration=None)
    assert launch._run(args) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "[launch] interrupted while preparing the simulated robot: nothing was run"
    assert not any("starting graph" in line for line in err)


def test_the_launch_files_preparation_entry_builds_and_refuses_bad_arguments(cache, tmp_path):
    """``python -m soft_inverse_ros.core.jit_warm_up --plant-of GRAPH name:=value ...``: what
    ``ros2 launch`` runs before the nodes (launch_support.plant_preparation)."""
    import os
    import subprocess
    import sys

    from soft_inverse_ros.core.jit_warm_up import graph_prebuilds_a_plant

    params = tmp_path / "p.yaml"
    params.write_text(PARAMS)
    assert graph_prebuilds_a_plant(_specs(params))
    assert not graph_prebuilds_a_plant(_specs(params, plant_model="fem"))
    assert not graph_prebuilds_a_plant(build_graph("hardware", {"servos": "drivers/servo_sim.yaml"}))
    entry = [sys.executable, "-m", "soft_inverse_ros.core.jit_warm_up", "--plant-of", "sim"]
    env = dict(os.environ)
    out = subprocess.run([*entry, "robot:=builtin_diamond", f"params_file:={params}"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "simulated robot built (once for this robot and code" in out.stdout
    assert len(list(cache.glob("modal_plant-*.npz"))) == 1
    for bad in (["robot"], ["no_such_argument:=1"]):
        out = subprocess.run([*entry, *bad], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
