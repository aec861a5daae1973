#!/usr/bin/env bash
# Train on a Cloud TPU VM pod slice: runs the trainer on every worker at once.
#
#   TPU_NAME=my-v4-32 ZONE=us-central2-b launch/tpu_pod.sh \
#       --gin_file=gin/runs/finetune_q4.gin --gin.MODEL_DIR=/mnt/shared/runs/q4 \
#       --gin.DATA_DIR=/mnt/shared/prepared --gin.INIT_CHECKPOINT=/mnt/shared/mt5-xxl
#
# The repository must be checked out (and installed) at REPO_DIR on every
# worker. Each worker runs launch/tpu_worker.sh, where
# jax.distributed.initialize() finds the pod's coordinator and the worker's
# index from the TPU metadata. MODEL_DIR (and DATA_DIR, INIT_CHECKPOINT) must
# be a local path that every worker sees the same, e.g. a shared persistent
# disk or a bucket mounted with gcsfuse.
set -euo pipefail

: "${TPU_NAME:?set TPU_NAME to the TPU VM name}"
: "${ZONE:?set ZONE to the TPU VM zone}"
REPO_DIR="${REPO_DIR:-~/seahorse-metrics}"
GCLOUD="${GCLOUD:-gcloud}"

args=""
for arg in "$@"; do
  args+=" $(printf '%q' "$arg")"
done

"$GCLOUD" compute tpus tpu-vm ssh "$TPU_NAME" --zone="$ZONE" --worker=all \
  --command="cd ${REPO_DIR} && launch/tpu_worker.sh${args}"
