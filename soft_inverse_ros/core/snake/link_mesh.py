"""Parametric mesh of the two-chamber bending link (soft snake, Fig. 1–3 of the paper).

A structured grid of hexahedra (Kuhn-split into tetrahedra by
:func:`~soft_inverse_ros.core.model.mesh_generation._grid_mesh`) with two chamber voids
either side of the centre plane y = 0 (the inextensible layer). Link frame: x along the
link (0 … length), y across it (left chamber y < 0, right chamber y > 0), z up; metres.
The node planes x = const are the link's cross-sections (13 in the paper: 12 hexes along x).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.model.mesh import TetMesh
from soft_inverse_ros.core.model.mesh_generation import _grid_mesh


@dataclass(frozen=True)
class LinkGeometry:
    """Link dimensions [m] and grid divisions.

    The grid has ``sections − 1`` hexes along x, 6 across y (cells of width/6: wall, chamber,
    wall | wall, chamber, wall, so the centre plane y = 0 is a node plane) and 3 along z
    (floor, chamber, roof). Each chamber is the middle z cell of its y cell over every x cell
    but the two end walls.
    """

    length: float = 0.080
    width: float = 0.030
    height: float = 0.024
    sections: int = 13

    def __post_init__(self) -> None:
        for name in ("length", "width", "height"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"link {name} must be > 0 m, got {v!r}")
        if not (isinstance(self.sections, (int, np.integer)) and self.sections >= 4):
            raise ValueError(f"link sections must be an integer >= 4, got {self.sections!r}")


@dataclass(frozen=True)
class LinkMesh:
    """The link's tet mesh and the node sets its constraints use.

    Attributes:
        mesh: the tet mesh [m], link frame.
        grid_ids: (nx+1, 7, 4) node index of each grid point (−1 where no node).
        step: (3,) grid step [m].
        chamber_cells_y: y cell index of the (left, right) chamber.
    """

    mesh: TetMesh
    grid_ids: np.ndarray
    step: np.ndarray
    chamber_cells_y: tuple[int, int] = (1, 4)

    def section_nodes(self, i: int) -> np.ndarray:
        """Node ids of cross-section i (the plane x = i·step_x)."""
        ids = self.grid_ids[i].ravel()
        return ids[ids >= 0]

    def chamber_corner_ids(self, side: int) -> np.ndarray:
        """(nx+1, 4) node ids of the 4 axial edges of chamber ``side`` (0 left, 1 right), by
        section; corners ordered (y0 z0), (y1 z0), (y1 z1), (y0 z1)."""
        j = self.chamber_cells_y[side]
        g = self.grid_ids
        return np.stack([g[:, j, 1], g[:, j + 1, 1], g[:, j + 1, 2], g[:, j, 2]], axis=1)

    def centre_layer_ids(self) -> np.ndarray:
        """(nx+1, 4) node ids of the centre plane y = 0 (the inextensible layer), by section."""
        return self.grid_ids[:, 3, :]


def build_link_mesh(geometry: LinkGeometry = LinkGeometry(), n_links: int = 1) -> LinkMesh:
    """The mesh of ``n_links`` two-chamber links in a row along x, (sections − 1) hexes each,
    sharing their end sections (the plates): (n_links·(sections − 1) + 1)·7·4 nodes (the
    chambers are interior cell voids, so every grid point is a node)."""
    per = geometry.sections - 1
    nx = n_links * per
    step = np.array([geometry.length / per, geometry.width / 6.0, geometry.height / 3.0])
    keep = np.ones((nx, 6, 3), dtype=bool)
    for link in range(n_links):
        for j in (1, 4):
            keep[link * per + 1:(link + 1) * per - 1, j, 1] = False
    origin = np.array([0.0, -geometry.width / 2.0, 0.0])
    mesh = _grid_mesh(origin, step, keep, "generated:snake-link")
    # every grid point is used (voids are interior cells): ids in C order of the grid
    ids = np.arange((nx + 1) * 7 * 4).reshape(nx + 1, 7, 4)
    expected = origin + np.argwhere(np.ones((nx + 1, 7, 4), dtype=bool)) * step
    if mesh.points.shape != expected.shape or not np.allclose(mesh.points, expected):
        raise AssertionError("link grid numbering changed")  # guards the id formula above
    return LinkMesh(mesh=mesh, grid_ids=ids, step=step)
