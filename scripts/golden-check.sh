#!/usr/bin/env bash
# Reruns the reference implementation (ajv 8 + ajv-formats) over the golden
# corpus and checks that the stored verdicts are still ajv's; then checks that
# the Go validator matches them. Needs node >= 18 and npm.
set -euo pipefail
cd "$(dirname "$0")/ajv-golden"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "golden-check: node and npm are needed (apt-get install -y nodejs npm)" >&2
  exit 1
fi
npm ci --no-audit --no-fund --loglevel=error
node golden.mjs --check
cd ../..
go test -count=1 -run 'TestGolden|TestSeed' ./contract
