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
run_pytest() {
  "$REPO/.venv/bin/python" -m pytest "$@"
  local rc=$?
  if [[ $rc -eq 5 ]]; then
    echo "[test] error: pytest collected no tests ($*)" >&2
    return 1
  fi
  return $rc
}
if [[ $# -gt 0 ]]; then  # the caller chose: one pytest run with its arguments
  run_pytest "$@"
  exit $?
fi
# The whole suite in two runs: the core tests (no ROS, CPU-bound numerics) on every core
# (pytest-xdist, at most 4 workers), then the integration tests one at a time (they start
# real node graphs, whose timing must not compete with another test's).
workers=$(nproc 2>/dev/null || echo 1)
(( workers > 4 )) && workers=4
core_args=()
(( workers > 1 )) && core_args=(-n "$workers")
run_pytest "${core_args[@]}" test/core
core_rc=$?
run_pytest test/integration
integration_rc=$?
if (( core_rc != 0 || integration_rc != 0 )); then
  echo "[test] failed: core tests exit $core_rc, integration tests exit $integration_rc" >&2
  exit 1
fi
exit 0
