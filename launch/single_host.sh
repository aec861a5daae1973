#!/usr/bin/env bash
# Train on one host (all its CPUs/GPUs/TPU chips) as a one-process JAX job.
#
#   launch/single_host.sh --gin_file=gin/runs/finetune_q4.gin \
#       --gin.MODEL_DIR=runs/q4 --gin.DATA_DIR=prepared/ --gin.INIT_CHECKPOINT=mt5-large/
#
# jax.distributed.initialize() runs with this host as the coordinator of a
# one-process job, the same code path as the multi-host scripts. Running the
# script again on the same MODEL_DIR resumes from the last checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
PORT="${COORDINATOR_PORT:-$((20000 + RANDOM % 20000))}"

exec "$PYTHON" -m seahorse_metrics.train \
  --multihost \
  --coordinator_address="127.0.0.1:${PORT}" \
  --num_processes=1 \
  --process_id=0 \
  "$@"
