"""Every executable a graph starts exists as a node module and a console script."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from soft_inverse_ros.graph import GRAPHS, build_graph

REPO = Path(__file__).resolve().parents[2]
HARDWARE_ARGS = {"servos": "s.yaml", "valves": "v.yaml", "mocap": "m.yaml", "record": "/tmp/b"}


def _console_scripts() -> set[str]:
    """Node names of setup.py's NODES tuple (read from the source, not executed)."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "NODES" for t in node.targets
        ):
            comp = node.value
            assert isinstance(comp, ast.ListComp), "NODES is expected to be a comprehension"
            names = comp.generators[0].iter
            return {elt.value for elt in names.elts}
    raise AssertionError("setup.py has no NODES")


def _executables() -> set[str]:
    found = set()
    for graph in GRAPHS:
        for combined in ("false", "true"):
            args = {"combined": combined, "record": "/tmp/b"}
            if "combined" not in GRAPHS[graph].arguments:  # the hybrid graph has no FEM pair
                del args["combined"]
            if graph == "hardware":
                args.update(HARDWARE_ARGS)
            args = {k: v for k, v in args.items() if k in GRAPHS[graph].arguments}
            found.update(spec.executable for spec in build_graph(graph, args))
    return found


def test_graph_executables_are_modules_with_main_and_console_scripts():
    scripts = _console_scripts()
    for executable in sorted(_executables()):
        module = f"soft_inverse_ros.nodes.{executable}"
        assert importlib.util.find_spec(module) is not None, f"{module} does not exist"
        source = (REPO / "soft_inverse_ros" / "nodes" / f"{executable}.py").read_text()
        assert "def main(" in source, f"{module} has no main()"
        assert executable in scripts, f"{executable} is not a console script in setup.py"
