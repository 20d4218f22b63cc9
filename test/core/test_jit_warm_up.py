"""core/jit_warm_up.py: setup's warm-up fills numba's cache with every kernel the main
job's nodes compile, and a second process loads them instead of compiling again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.core.jit_warm_up import solver_config_from_params
from soft_inverse_ros.core.control.shipped_settings import controller_params

#: The kernels a main-job run (`demo`) on a fresh clone compiled into ``__pycache__``
#: (listed from a fresh clone after its first demo, seventeenth session).
MAIN_JOB_KERNELS = {
    "fem_kernels._polar_batch", "fem_kernels._polar_svd", "fem_kernels.element_state",
    "fem_kernels.stiffness_data", "fem_kernels.consistent_data", "ldl_kernels.ldl_block_solve",
    "tick_kernels.direct_tick",
    "tick_kernels.finish_py", "tick_kernels.prepare_py", "tick_kernels.slacks_py",
    "cable_kernels.strokes_and_gradient",
    # not the main job's: the self-collision narrow phase of the contact scenes
    "narrow_phase._excluded", "narrow_phase.narrow_phase_py", "narrow_phase.box_candidates_py",
}


def test_the_solver_settings_are_the_shipped_controllers():
    config = solver_config_from_params(controller_params(find_config("sim.yaml")))
    assert config.backend == "daqp" and config.epsilon == pytest.approx(0.001)
    assert solver_config_from_params({"qp.epsilon": 0.02, "rate_hz": 5.0}).epsilon == 0.02


def _run(cache: Path) -> str:
    pytest.importorskip("numba")
    out = subprocess.run([sys.executable, "-m", "soft_inverse_ros.core.jit_warm_up"],
                         env={**os.environ, "NUMBA_CACHE_DIR": str(cache),
                              "SOFT_INVERSE_ROS_CACHE_DIR": str(cache.parent / "builds")},
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _index_files(cache: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in cache.rglob("*.nbi")}


def test_the_warm_up_caches_every_main_job_kernel_and_a_second_run_compiles_nothing(tmp_path):
    cache = tmp_path / "numba"
    assert "compiled or loaded" in _run(cache)
    first = _index_files(cache)
    # "<module>.<function>-<line>.py311.nbi"
    assert {name.rsplit("-", 1)[0] for name in first} >= MAIN_JOB_KERNELS
    (plant,) = (cache.parent / "builds" / "plants").glob("modal_plant-*.npz")  # the demo's plant
    built = plant.stat().st_mtime_ns
    _run(cache)
    assert _index_files(cache) == first  # a new signature would have rewritten an index
    assert plant.stat().st_mtime_ns >= built and len(list(plant.parent.iterdir())) == 1  # loaded
