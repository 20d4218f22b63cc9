"""The inverse solver's settings as a graph's parameter file gives them to
``inverse_controller_node``: benchmarks, experiments and the set-up's kernel warm-up
measure what the launch files ship, not a configuration of their own.

Free of ROS: the file is read as YAML (``<node>: ros__parameters: {...}``), the node's
``qp.*`` keys become :class:`~soft_inverse_ros.core.control.inverse_qp.InverseSolverConfig`
fields, as ``declare_config(..., prefix="qp.")`` does in the node.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

__all__ = ["node_params", "controller_params", "solver_config_from_params", "shipped_solver_config"]


def node_params(params_file: str | Path, node: str) -> dict[str, Any]:
    """The ``node`` parameter section of a graph's parameter file ({} if none): a path, or
    a name in the package's config folders (as the graphs take it)."""
    import yaml

    from soft_inverse_ros.core.config_files import find_config

    path = Path(params_file)
    if not path.is_file() and not path.is_absolute():
        path = find_config(str(params_file))
    data = yaml.safe_load(path.read_text()) or {}
    return (data.get(node) or {}).get("ros__parameters") or {}


def controller_params(params_file: str | Path) -> dict[str, Any]:
    """The ``inverse_controller_node`` parameter section of a graph's parameter file ({} if none)."""
    return node_params(params_file, "inverse_controller_node")


def solver_config_from_params(params: dict[str, Any], **overrides: Any):
    """The :class:`InverseSolverConfig` of an ``inverse_controller_node`` parameter section
    (its ``qp.*`` keys; lists become tuples as the node's parameters do), then ``overrides``
    (field names without ``qp.``: what the node takes from the robot description, e.g. the
    contact-force limits)."""
    from soft_inverse_ros.core.control.inverse_qp import InverseSolverConfig

    names = {f.name for f in fields(InverseSolverConfig) if f.init}
    values = {key[3:]: tuple(v) if isinstance(v, list) else v
              for key, v in params.items() if key.startswith("qp.") and key[3:] in names}
    values.update(overrides)
    return InverseSolverConfig(**values)


def shipped_solver_config(params_file: str = "sim.yaml", **overrides: Any):
    """:func:`solver_config_from_params` of a shipped parameter file (``config/``, e.g.
    ``sim_hybrid.yaml``)."""
    from soft_inverse_ros.core.config_files import find_config

    return solver_config_from_params(controller_params(find_config(params_file)), **overrides)
