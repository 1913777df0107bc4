package main

import (
	"flag"
	"strings"
)

// defaultDB is the store ovlive uses without --db.
const defaultDB = "sqlite:./ovlive.db"

// dbFlags are the flags that choose the store.
type dbFlags struct {
	dsn    string
	schema string
}

// register adds --db and --db-schema to fs, keeping d's values when they
// are set (so `admin --db X person add` and `admin person add --db X` agree).
func (d *dbFlags) register(fs *flag.FlagSet) {
	if d.dsn == "" {
		d.dsn = defaultDB
	}
	fs.StringVar(&d.dsn, "db", d.dsn, "the store: `DSN` sqlite:PATH or postgres://USER@HOST:PORT/DB?sslmode=... "+
		"(keep a password out of it, where every user can read it in the process list: use a --config file, OVLIVE_DB, PGPASSWORD or ~/.pgpass)")
	fs.StringVar(&d.schema, "db-schema", d.schema, "PostgreSQL only: the `SCHEMA` to create (if needed) and use")
	fs.Lookup("db").DefValue, fs.Lookup("db-schema").DefValue = defaultDB, ""
}

// stringList is a repeatable string flag.
type stringList []string

// String joins the values with commas.
func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set adds a value.
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
