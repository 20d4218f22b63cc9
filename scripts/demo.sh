#!/usr/bin/env bash
# Set up (idempotently, see scripts/setup.sh) and run the main job: the simulated robot
# tracking the square trajectory, recorded to an MCAP bag, with a report.
# Extra arguments go to `soft-inverse-ros demo` (e.g. --duration 60 --out /tmp/run).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/setup.sh"
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export MPLBACKEND=Agg
exec "$REPO/.venv/bin/soft-inverse-ros" demo "$@"
