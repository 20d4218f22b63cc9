"""``demo`` builds the simulated robot's reduced model into the plant build cache before
the graph starts (commands/demo._prebuild_plant): once, then loaded, a line saying which;
nothing for a full-FEM plant; a robot that cannot be built is left to the node, which
reports it; Ctrl-C while it builds is one line and exit status 130."""

from __future__ import annotations

import argparse

import pytest

from soft_inverse_ros.commands.demo import _prebuild_plant
from soft_inverse_ros.core.sim import build_cache

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


def _args(params, **kw):
    return argparse.Namespace(**{"robot": "builtin_diamond", "plant_model": None, "params_file": str(params), **kw})


def test_built_once_then_loaded(cache, tmp_path, capsys):
    params = tmp_path / "p.yaml"
    params.write_text(PARAMS)
    _prebuild_plant(_args(params))
    assert "simulated robot built (once for this robot and code" in capsys.readouterr().out
    assert len(list(cache.glob("modal_plant-*.npz"))) == 1
    _prebuild_plant(_args(params))
    assert "simulated robot loaded from the build cache" in capsys.readouterr().out
    assert len(list(cache.glob("*.npz"))) == 1


def test_full_fem_and_unbuildable_robots_are_left_to_the_node(cache, tmp_path, capsys):
    params = tmp_path / "p.yaml"
    params.write_text(PARAMS)
    _prebuild_plant(_args(params, plant_model="fem"))
    assert capsys.readouterr().out == ""  # a full FEM has nothing to build ahead
    _prebuild_plant(_args(params, robot="no_such_robot"))
    assert "simulated robot" not in capsys.readouterr().out.replace("preparing the simulated", "")
    assert not cache.exists()


def test_ctrl_c_while_building_is_one_line(cache, tmp_path, capsys, monkeypatch):
    from soft_inverse_ros.core.sim import plant as plant_module

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(plant_module, "make_plant", interrupted)
    params = tmp_path / "p.yaml"
    params.write_text(PARAMS)
    with pytest.raises(SystemExit) as exit_info:
        _prebuild_plant(_args(params))
    assert exit_info.value.code == 130
    assert capsys.readouterr().err.strip() == ("[demo] interrupted while preparing the simulated "
                                               "robot: nothing was run")
