#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers on 127.0.0.1:5432 with a database
# `test` that root can use, and prints the DSN for the tests. On a machine
# that already runs one (trust auth), it only starts it when stopped; on a
# fresh Debian machine it installs Debian's postgresql, starts it and creates
# a `root` role with a password and the `test` database.
set -euo pipefail
dsn_trust='postgres://root@127.0.0.1:5432/test?sslmode=disable'
dsn_password='postgres://root:agentsandbox@127.0.0.1:5432/test?sslmode=disable'

if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "ci-postgres: installing postgresql" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends postgresql >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends postgresql >/dev/null; }
fi
version=$(ls /etc/postgresql | sort -V | tail -1)
if ! pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1; then
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 50); do pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1 && break; sleep 0.2; done
fi
if psql "$dsn_trust" -Atc 'select 1' >/dev/null 2>&1; then
  echo "$dsn_trust"
  exit 0
fi
# A fresh cluster: password auth on 127.0.0.1, so give root a role and a database.
su postgres -c "psql -q -v ON_ERROR_STOP=1" <<'SQL' >/dev/null
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'root') THEN
    CREATE ROLE root LOGIN SUPERUSER PASSWORD 'agentsandbox';
  ELSE
    ALTER ROLE root LOGIN PASSWORD 'agentsandbox';
  END IF;
END $$;
SQL
su postgres -c "psql -Atc \"select 1 from pg_database where datname='test'\"" | grep -q 1 ||
  su postgres -c "createdb -O root test"
psql "$dsn_password" -Atc 'select 1' >/dev/null
echo "$dsn_password"
