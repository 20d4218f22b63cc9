"""Contact figures of a run, from the simulated robot's /diagnostics (robots with a
collision section: ``contacts``, ``contact_force_total_N``, ``contact_free_penetration_mm``
of ``plant_sim_node``'s plant status, one sample per diagnostics window)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from soft_inverse_ros.analysis.validity import plant_statuses


@dataclass(frozen=True)
class ContactSeries:
    """One sample per plant diagnostics window (the last contact correction of the window).

    Attributes:
        t: bag receive times [s since the first plant status].
        contacts: contacts of the last correction.
        force_total: their total normal force [N].
        free_penetration: how far the free motion went into contact [m] (corrected away).
    """

    t: np.ndarray
    contacts: np.ndarray
    force_total: np.ndarray
    free_penetration: np.ndarray

    def summary(self) -> dict[str, Any]:
        touching = self.contacts > 0
        return {
            "windows": int(self.t.size),
            "windows_in_contact": int(touching.sum()),
            "contacts_max": int(self.contacts.max(initial=0)),
            "contact_force_total_max_N": float(self.force_total.max(initial=0.0)),
            "free_penetration_max_mm": 1e3 * float(self.free_penetration.max(initial=0.0)),
        }


def load_contacts(bag: str | Path, namespace: str | None = None) -> ContactSeries | None:
    """The plant's contact series (None: no plant diagnostics with contact figures)."""
    t, n, f, p = [], [], [], []
    t0 = None
    for receive_ns, _, values in plant_statuses(bag, namespace):
        t0 = receive_ns if t0 is None else t0
        if "contacts" not in values:
            continue
        t.append((receive_ns - t0) * 1e-9)
        n.append(float(values["contacts"]))
        f.append(float(values.get("contact_force_total_N", "0")))
        p.append(1e-3 * float(values.get("contact_free_penetration_mm", "0")))
    if not t:
        return None
    return ContactSeries(np.asarray(t), np.asarray(n), np.asarray(f), np.asarray(p))


def plot_contacts(series: ContactSeries, path: str | Path) -> Path:
    """Contacts and total contact force over the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10.0, 3.2))
    ax.step(series.t, series.contacts, where="post", color="tab:red", label="contacts")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("contacts")
    right = ax.twinx()
    right.plot(series.t, series.force_total, color="tab:orange", label="total contact force [N]")
    right.set_ylabel("force [N]")
    ax.grid(True, alpha=0.3)
    fig.legend(loc="upper right", fontsize=8)
    fig.suptitle("contacts of the simulated robot")
    path = Path(path)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
