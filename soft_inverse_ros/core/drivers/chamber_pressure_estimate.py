"""Modelled pressure of chambers without a sensor, from the duties the valve board applies.

A chamber driven open loop has no measurement; the valve driver node still reports a
pressure for it (``sensor_msgs/JointState.effort``) by integrating the chamber's
:class:`~soft_inverse_ros.core.drivers.pneumatic_model.PneumaticChambers` model (the same
model as the feedforward, latency included) with the duty the board reports applying
each period. A period without a reading (NaN duty: link lost, driver in ERROR) counts as
duty 0, the board's safe state (its watchdog vents).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticChambers, PneumaticParams


class OpenLoopPressureEstimate:
    """n chambers' gauge pressures [Pa] integrated from applied duties.

    Args:
        params: Pneumatic model of each chamber (order of the duties given to ``update``).
    """

    def __init__(self, params: Sequence[PneumaticParams]) -> None:
        self._params = tuple(params)
        self._model = PneumaticChambers(self._params)

    @property
    def size(self) -> int:
        return self._model.size

    @property
    def pressure(self) -> np.ndarray:
        """Modelled pressures now [Pa] (a copy)."""
        return self._model.pressure.copy()

    def reset(self) -> None:
        """Start again from vented chambers (0 Pa), e.g. after the link was reopened."""
        self._model = PneumaticChambers(self._params)

    def update(self, now: float, duty: np.ndarray) -> np.ndarray:
        """Apply the duties [0, 1] reported at time ``now`` [s]; return the pressures [Pa].

        Raises:
            ValueError: ``duty`` is not of shape (n,).
        """
        d = np.asarray(duty, dtype=float)
        if d.shape != (self.size,):
            raise ValueError(f"duty has shape {d.shape}, expected ({self.size},)")
        self._model.command(now, np.where(np.isfinite(d), d, 0.0))
        return self.pressure
