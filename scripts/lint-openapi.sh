#!/usr/bin/env bash
# Lints docs/openapi.yaml with Redocly's OpenAPI linter (pinned in
# scripts/openapi-lint/package.json; every recommended rule an error, see
# redocly.yaml). Needs node >= 20 and npm.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "lint-openapi: node and npm are needed (apt-get install -y nodejs npm)" >&2
  exit 1
fi
(cd scripts/openapi-lint && npm ci --no-audit --no-fund --loglevel=error)
scripts/openapi-lint/node_modules/.bin/redocly lint --format=summary docs/openapi.yaml 2>&1 | grep -v '[║╔╚]'
