"""Which compiled (numba) kernel modules run: one place for the choice that the cable rows
(core/model/constraints.py) and the reduced model's projection (core/model/reduced_model.py)
make. ``SOFT_INVERSE_ROS_FEM_KERNELS=numpy`` selects the numpy/scipy reference paths, as for
the FEM's element kernels; without numba those paths run too."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def compiled_module(name: str) -> ModuleType | None:
    """The kernel module ``soft_inverse_ros.core.model.<name>``, or None for the reference
    path (``SOFT_INVERSE_ROS_FEM_KERNELS=numpy``, or numba not importable)."""
    if os.environ.get("SOFT_INVERSE_ROS_FEM_KERNELS") == "numpy":
        return None
    try:
        return importlib.import_module(f"soft_inverse_ros.core.model.{name}")
    except ImportError:
        return None
