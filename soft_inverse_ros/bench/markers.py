"""``soft-inverse-ros bench markers``: cost of drawing the robot (RViz markers, PNG).

For a tetrahedral mesh (``--mesh FILE``, its format read from its content, lengths scaled by ``--scale``;
default a structured box of ``--cells`` per side split into 6 tets per cell), times:
boundary extraction (once per mesh), Scene building, Scene -> MarkerArray (rclpy
messages) with a uniform surface colour and with pressure colouring (per-vertex
colours), CDR serialization of the MarkerArray, and the offscreen PNG render.
Median over ``--repeat`` runs [ms]. With ``--json`` the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from soft_inverse_ros import finite_json
from soft_inverse_ros.cli_values import count, positive


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("markers", help="robot marker / render cost", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--mesh", type=Path, help="tetrahedral mesh file (meshio)")
    parser.add_argument("--scale", type=positive, default=None,
                        help="--mesh's length unit in m (default 1e-3: mm)")
    parser.add_argument("--cells", type=count, default=None,
                        help="cells per side of the box mesh used without --mesh (default 12)")
    parser.add_argument("--repeat", type=count, default=7)
    parser.set_defaults(func=run)


def _box(cells: int):
    import numpy as np

    n = cells + 1
    g = np.stack(np.meshgrid(*(np.linspace(0, 0.05, n),) * 3, indexing="ij"), -1).reshape(-1, 3)
    idx = np.arange(n**3).reshape(n, n, n)
    c = idx[:-1, :-1, :-1].ravel()
    corners = np.stack([c, c + n * n, c + n * n + n, c + n, c + 1, c + n * n + 1,
                        c + n * n + n + 1, c + n + 1], axis=1)
    split = [[0, 1, 2, 6], [0, 2, 3, 6], [0, 3, 7, 6], [0, 7, 4, 6], [0, 4, 5, 6], [0, 5, 1, 6]]
    return g, corners[:, split].reshape(-1, 4)


def _median_ms(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return 1e3 * times[len(times) // 2], out


def run(args: argparse.Namespace) -> int:
    import numpy as np
    from rclpy.serialization import serialize_message

    from soft_inverse_ros.core.model.visualization import boundary_faces, render_scene_png, robot_scene
    from soft_inverse_ros.nodes.markers import scene_to_marker_array

    if args.mesh is None and args.scale is not None:
        print("soft-inverse-ros bench markers: --scale applies to --mesh only "
              "(without it the box mesh of --cells is used)", file=sys.stderr)
        return 2
    if args.mesh is not None and args.cells is not None:
        print("soft-inverse-ros bench markers: --cells sizes the box used without --mesh; "
              "give one or the other", file=sys.stderr)
        return 2
    scale = 1e-3 if args.scale is None else args.scale
    cells = 12 if args.cells is None else args.cells
    if args.mesh is not None:
        from soft_inverse_ros.core.model.mesh import MeshError, load_mesh

        try:
            mesh = load_mesh(args.mesh, unit_scale=scale)
        except MeshError as exc:
            print(f"soft-inverse-ros bench markers: {exc}", file=sys.stderr)
            return 2
        points, tets = mesh.points, mesh.tets
        name = args.mesh.name
    else:
        points, tets = _box(cells)
        name = f"box {cells}^3"
    res: dict = {"mesh": name, "nodes": int(len(points)), "tets": int(len(tets))}
    res["boundary_faces_ms"], faces = _median_ms(lambda: boundary_faces(tets, points), args.repeat)
    res["triangles"] = int(len(faces))
    cables = {"c0": points[:: max(1, len(points) // 10)][:10]}
    res["scene_ms"], plain = _median_ms(
        lambda: robot_scene(points, faces, effector=points[0], target=points[1], cables=cables),
        args.repeat)
    cavity = {"cav": np.arange(0, len(faces), 3)}
    colored = robot_scene(points, faces, effector=points[0], cavity_faces=cavity,
                          pressures={"cav": 5e3}, pressure_range=(0.0, 1e4))
    res["markers_uniform_ms"], array = _median_ms(lambda: scene_to_marker_array(plain), args.repeat)
    res["markers_pressure_ms"], array_p = _median_ms(lambda: scene_to_marker_array(colored), args.repeat)
    res["serialize_uniform_ms"], data = _median_ms(lambda: serialize_message(array), args.repeat)
    res["serialize_pressure_ms"], data_p = _median_ms(lambda: serialize_message(array_p), args.repeat)
    res["bytes_uniform"], res["bytes_pressure"] = len(data), len(data_p)
    with tempfile.TemporaryDirectory() as tmp:
        res["render_png_ms"], _ = _median_ms(
            lambda: render_scene_png(colored, Path(tmp) / "r.png"), max(1, args.repeat // 3))
    for key, value in res.items():
        print(f"{key:>22}: {value:.2f}" if isinstance(value, float) else f"{key:>22}: {value}")
    if args.json:
        print(finite_json.dumps(res))
    return 0
