#!/usr/bin/env bash
# One worker of a TPU pod job (started on every worker by launch/tpu_pod.sh).
#
# jax.distributed.initialize() reads the coordinator address, the number of
# workers and this worker's index from the TPU VM metadata. Outside a TPU VM
# (or to override), set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and
# JAX_PROCESS_ID.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
flags=(--multihost)
[[ -n "${JAX_COORDINATOR_ADDRESS:-}" ]] && flags+=(--coordinator_address="$JAX_COORDINATOR_ADDRESS")
[[ -n "${JAX_NUM_PROCESSES:-}" ]] && flags+=(--num_processes="$JAX_NUM_PROCESSES")
[[ -n "${JAX_PROCESS_ID:-}" ]] && flags+=(--process_id="$JAX_PROCESS_ID")

exec "$PYTHON" -m seahorse_metrics.train "${flags[@]}" "$@"
