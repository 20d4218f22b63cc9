"""User errors: one clear line and a non-zero exit, never a traceback; implausible robots
are warned about."""

from __future__ import annotations

from soft_inverse_ros import cli
from soft_inverse_ros.core.model.description import plausibility_warnings


def test_a_bench_on_a_mesh_the_robot_does_not_fit_is_one_line(sofa_data, capsys):
    code = cli.main(["bench", "fem", "--mesh", str(sofa_data / "finger.vtk"), "--repeat", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith("soft-inverse-ros bench: error:")


def test_mesh_info_of_a_robot_that_cannot_be_built_fails(sofa_data, capsys):
    code = cli.main(["mesh-info", str(sofa_data / "finger.vtk"), "--robot", "builtin_diamond"])
    out, err = capsys.readouterr()
    assert code != 0
    assert "mesh-info: error" in err and "Traceback" not in err


def test_plausibility_warnings_catch_wrong_units():
    assert plausibility_warnings(0.15, 0.5, 1e6) == []
    assert "size" in plausibility_warnings(3e-5, 0.5, 1e6)[0]  # metres read as mm
    assert "mass" in plausibility_warnings(0.15, 3.2e8, 1e6)[0]  # mm declared in metres
    assert "Young" in plausibility_warnings(0.15, 0.5, 180.0)[0]  # '180' meant kPa
