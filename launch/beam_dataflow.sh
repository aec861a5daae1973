#!/usr/bin/env bash
# Score on Google Cloud Dataflow with GPU workers: `seahorse-metrics score
# --runner DataflowRunner` with the Dataflow options filled in.
#
#   PROJECT=my-project REGION=us-central1 BUCKET=gs://my-bucket \
#   IMAGE=us-central1-docker.pkg.dev/my-project/seahorse/beam-gpu:latest \
#   launch/beam_dataflow.sh --checkpoint q4=gs://my-bucket/seahorse-large-q4 \
#       --input 'gs://my-bucket/pairs/*.jsonl' --output gs://my-bucket/scored/pairs.jsonl --merge
#
# The arguments are those of `seahorse-metrics score`. This machine needs
# `pip install -e '.[beam]' 'apache-beam[gcp]'`. The workers run IMAGE, Beam's
# Python SDK image with JAX for CUDA and this project installed, e.g.
#
#   FROM apache/beam_python3.11_sdk:2.77.0
#   COPY . /src/seahorse-metrics
#   RUN pip install 'jax[cuda12]' '/src/seahorse-metrics[beam]'
#
# Checkpoints, inputs and outputs are on Cloud Storage; each worker copies the
# checkpoints to its disk once and loads them once. One SDK process with one
# thread per worker VM, so one copy of the models owns the GPU. The shards go
# to OUTPUT.shards/ as windows finish; a failed job resumes (finished windows
# are kept) when the same command is run again.
set -euo pipefail

: "${PROJECT:?set PROJECT to the Google Cloud project}"
: "${REGION:?set REGION, e.g. us-central1}"
: "${BUCKET:?set BUCKET to a gs:// bucket for Dataflow's temporary and staging files}"
: "${IMAGE:?set IMAGE to the workers' container image}"
PYTHON="${PYTHON:-python3}"

exec "$PYTHON" -m seahorse_metrics score "$@" \
  --runner DataflowRunner \
  --project="$PROJECT" \
  --region="$REGION" \
  --temp_location="$BUCKET/tmp" \
  --staging_location="$BUCKET/staging" \
  --sdk_container_image="$IMAGE" \
  --sdk_location=container \
  --machine_type="${MACHINE_TYPE:-g2-standard-8}" \
  --dataflow_service_options="worker_accelerator=type:${GPU_TYPE:-nvidia-l4};count:1;install-nvidia-driver" \
  --experiments=no_use_multiple_sdk_containers \
  --number_of_worker_harness_threads=1 \
  --max_num_workers="${MAX_WORKERS:-4}" \
  --job_name="seahorse-score-$(date +%Y%m%d-%H%M%S)"
