package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"openvibe.network/agentsandbox/internal/cli"
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
		"(keep a password out of it, where every user can read it in the process list: set PGPASSWORD or use ~/.pgpass)")
	fs.StringVar(&d.schema, "db-schema", d.schema, "PostgreSQL only: the `SCHEMA` to create (if needed) and use")
	fs.Lookup("db").DefValue, fs.Lookup("db-schema").DefValue = defaultDB, ""
}

// newFlags returns a flag set for the command named name (e.g. "admin person
// add"), whose --help prints synopsis and the flags to stderr.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ovlive "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ovlive %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs. It returns ok=false and the exit code when the
// command should stop: 0 after --help, 2 on a usage error (already printed).
// positional is how many arguments must follow the flags.
func parse(fs *flag.FlagSet, args []string, positional int) (code int, ok bool) {
	if code, ok := cli.ParseFlags(fs, args); !ok {
		return code, false
	}
	switch {
	case fs.NArg() != positional:
		if positional == 0 {
			fmt.Fprintf(fs.Output(), "%s: unexpected arguments: %s\n", fs.Name(), strings.Join(fs.Args(), " "))
		} else {
			fmt.Fprintf(fs.Output(), "%s: want %d argument(s), got %d\n", fs.Name(), positional, fs.NArg())
		}
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// usageError prints msg and the usage of fs, and returns exit code 2.
func usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return 2
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
