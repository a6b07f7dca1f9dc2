#!/usr/bin/env bash
# Runs `npm test` (unit and S3 integration tests) against MinIO in Docker (docker-compose.yml at
# the repository root), then removes the containers. Needs Docker with the compose plugin.
# STATEFOLD_MINIO_PORT picks the loopback port (default 9000).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

port="${STATEFOLD_MINIO_PORT:-9000}"
compose() { docker compose -p statefold-minio -f docker-compose.yml "$@"; }
trap 'compose down -v --remove-orphans >/dev/null 2>&1 || true' EXIT

compose up -d --wait --wait-timeout 120 minio
compose run --rm minio-bucket

export STATEFOLD_S3_ENDPOINT="http://127.0.0.1:$port"
export STATEFOLD_S3_REGION=us-east-1
export STATEFOLD_S3_BUCKET=statefold-test
export STATEFOLD_S3_ACCESS_KEY_ID=statefold
export STATEFOLD_S3_SECRET_ACCESS_KEY=statefold-secret
npm test
