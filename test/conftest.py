"""Shared pytest fixtures."""

from __future__ import annotations

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
#: SOFA SoftRobots meshes; override with SOFT_INVERSE_ROS_SHARED_DATA.
SHARED_DATA = pathlib.Path(
    os.environ.get(
        "SOFT_INVERSE_ROS_SHARED_DATA", REPO.parent / "shared" / "data" / "sofa-softrobots"
    )
)


@pytest.fixture(scope="session")
def sofa_data() -> pathlib.Path:
    """Folder of the SOFA meshes; the test is skipped (with the reason) when absent."""
    if not (SHARED_DATA / "diamond.vtk").is_file():
        pytest.skip(f"SOFA meshes not found at {SHARED_DATA} (../shared is absent)")
    return SHARED_DATA
