"""sensor_msgs/PointCloud2 <-> (n, 3) point arrays (x, y, z float32, no sensor_msgs_py).

The clouds of this package (``plant/markers_true``, ``mocap/markers``) are unorganized
(height 1), little-endian, with three FLOAT32 fields x, y, z at offsets 0, 4, 8 and a
12-byte point step. :func:`points_from_cloud` also reads other layouts (FLOAT32/FLOAT64
x, y, z fields at any offset, extra fields, either endianness), as published by
other tools.
"""

from __future__ import annotations

import numpy as np
from sensor_msgs.msg import PointCloud2, PointField

_XYZ_FIELDS = (
    PointField(name="x", offset=0, datatype=PointField.FLOAT32, count=1),
    PointField(name="y", offset=4, datatype=PointField.FLOAT32, count=1),
    PointField(name="z", offset=8, datatype=PointField.FLOAT32, count=1),
)
_DTYPES = {PointField.FLOAT32: "f4", PointField.FLOAT64: "f8"}


def cloud_from_points(points: np.ndarray, frame_id: str, stamp=None) -> PointCloud2:
    """PointCloud2 of points (n, 3) [m] in ``frame_id`` (x, y, z float32).

    Raises:
        ValueError: not an (n, 3) array, or non-finite values (never published).
    """
    p = np.asarray(points, dtype=float)
    if p.size == 0:
        p = p.reshape(0, 3)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"points must be (n, 3), got {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("point cloud with non-finite coordinates")
    msg = PointCloud2()
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = stamp
    msg.height = 1
    msg.width = len(p)
    msg.fields = list(_XYZ_FIELDS)
    msg.is_bigendian = False
    msg.point_step = 12
    msg.row_step = 12 * len(p)
    msg.is_dense = True
    msg.data = np.ascontiguousarray(p, dtype="<f4").tobytes()
    return msg


def points_from_cloud(msg: PointCloud2) -> np.ndarray:
    """(n, 3) float64 points of a cloud with float x, y, z fields (rows with a non-finite
    coordinate included: the caller decides what to do with them).

    Raises:
        ValueError: missing x/y/z fields, unsupported field types, or a truncated buffer.
    """
    fields = {f.name: f for f in msg.fields}
    missing = [a for a in "xyz" if a not in fields]
    if missing:
        raise ValueError(f"point cloud lacks field(s) {missing}")
    n = int(msg.width) * int(msg.height)
    step = int(msg.point_step)
    data = bytes(msg.data)
    if n == 0:
        return np.zeros((0, 3))
    if msg.height > 1 and int(msg.row_step) != int(msg.width) * step:
        raise ValueError("organized point cloud with padded rows is not supported")
    if step <= 0 or len(data) < n * step:
        raise ValueError(f"point cloud data has {len(data)} bytes, expected {n} x {step}")
    order = ">" if msg.is_bigendian else "<"
    names, formats, offsets = [], [], []
    for axis in "xyz":
        f = fields[axis]
        if f.datatype not in _DTYPES:
            raise ValueError(f"point cloud field {axis} has unsupported datatype {f.datatype}")
        names.append(axis)
        formats.append(order + _DTYPES[f.datatype])
        offsets.append(int(f.offset))
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": step})
    rec = np.frombuffer(data, dtype=dtype, count=n)
    return np.column_stack([rec[a].astype(float) for a in "xyz"])
