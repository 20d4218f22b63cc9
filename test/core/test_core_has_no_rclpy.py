"""The numerical core must stay importable and testable without ROS 2."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "soft_inverse_ros"
CORE = PACKAGE / "core"
#: packages that must import without ROS 2: the numerical core and the test fixtures
ROS_FREE = (CORE, PACKAGE / "testing")


def _imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_modules_exist():
    assert len(list(CORE.rglob("*.py"))) >= 2


def test_no_core_module_imports_ros():
    offenders = {}
    for path in (p for root in ROS_FREE for p in root.rglob("*.py")):
        ros = {
            m
            for m in _imported_modules(path)
            if m.split(".")[0] in {"rclpy", "soft_inverse_ros_msgs", "launch", "launch_ros"}
            or m.startswith("soft_inverse_ros.nodes")
        }
        if ros:
            offenders[str(path.relative_to(PACKAGE))] = sorted(ros)
    assert not offenders, f"core modules import ROS: {offenders}"
