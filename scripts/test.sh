#!/usr/bin/env bash
# Set up (idempotently, see scripts/setup.sh) and run the whole test suite.
# Extra arguments go to pytest. Exit code 5 (no test collected) counts as a failure.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/setup.sh" || exit 1
cd "$REPO"
# Keep the test graph off any other ROS 2 graph on this machine.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( (RANDOM % 90) + 10 ))}"
export MPLBACKEND=Agg
"$REPO/.venv/bin/python" -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "[test] error: pytest collected no tests" >&2
  exit 1
fi
exit $rc
