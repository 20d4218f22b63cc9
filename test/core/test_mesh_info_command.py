"""``soft-inverse-ros mesh-info``: output and clean errors (exit code 2, no traceback)."""

from __future__ import annotations

from pathlib import Path

import meshio
import numpy as np
import pytest

from soft_inverse_ros.cli import main
from soft_inverse_ros.core.model.mesh_generation import box_mesh


def test_mesh_info_on_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    box = box_mesh((20.0, 10.0, 10.0), (2, 1, 1))
    path = tmp_path / "box.vtk"  # VTK XML content behind a .vtk name
    meshio.write(str(path), meshio.Mesh(np.asarray(box.points), [("tetra", np.asarray(box.tets))]), file_format="vtu")
    assert main(["mesh-info", str(path), "--unit", "mm"]) == 0
    out = capsys.readouterr().out
    assert "format:        vtu" in out
    assert "nodes:         12" in out and "tetrahedra:    12" in out
    assert "volume:        2e-06 m^3" in out
    assert "[0.02, 0.01, 0.01]" in out


def test_mesh_info_on_the_builtin_robot(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mesh-info", "--robot", "builtin_diamond"]) == 0
    out = capsys.readouterr().out
    assert "generated:diamond" in out and "connected:     yes" in out
    assert "points tip:" in out and "OUTSIDE" not in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["mesh-info", "/no/such/mesh.vtu"], "mesh file not found"),
        (["mesh-info", "--robot", "no_such_robot"], "neither an existing file nor a known robot"),
        (["mesh-info"], "give a mesh FILE"),
    ],
)
def test_mesh_info_errors(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert needle in captured.err and "Traceback" not in captured.err


def test_mesh_info_bad_unit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    box = box_mesh((1.0, 1.0, 1.0), (1, 1, 1))
    path = tmp_path / "b.vtu"
    meshio.write(str(path), meshio.Mesh(np.asarray(box.points), [("tetra", np.asarray(box.tets))]))
    assert main(["mesh-info", str(path), "--unit", "kPa"]) == 2
    assert "expected a length" in capsys.readouterr().err
