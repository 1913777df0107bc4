package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"openvibe.network/agentsandbox/live/httpapi"
)

// dbFlags are the flags that choose the store and how long to wait for it.
type dbFlags struct {
	dsn     string
	schema  string
	timeout time.Duration
}

// register adds --db and --db-schema to fs, keeping d's values when they
// are set (so `admin --db X person add` and `admin person add --db X` agree).
func (d *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.dsn, "db", d.dsn, "the store: `DSN` sqlite:PATH or postgres://USER@HOST:PORT/DB?sslmode=... (required) "+
		"(keep a password out of it, where every user can read it in the process list: use a --config file, OVLIVE_DB, PGPASSWORD or ~/.pgpass)")
	fs.StringVar(&d.schema, "db-schema", d.schema, "PostgreSQL only: the `SCHEMA` to create (if needed) and use")
	if d.timeout == 0 {
		d.timeout = httpapi.DefaultStoreTimeout
	}
	durationVar(fs, &d.timeout, "db-timeout", d.timeout, "how long a request (serve) or a new connection waits for the database (`DURATION`; "+
		"past it serve answers 503; keep it under the workers' 10 s)")
	fs.Lookup("db").DefValue, fs.Lookup("db-schema").DefValue, fs.Lookup("db-timeout").DefValue = "", "", httpapi.DefaultStoreTimeout.String()
}

// errNoDB says that no store was named: ovlive never picks a file of its
// own (one in whatever directory it was started from).
var errNoDB = errors.New("no database: give --db sqlite:PATH or --db postgres://USER@HOST:PORT/DB (or OVLIVE_DB, or db in a --config file)")

// check fails when no store is named, or the timeout is not positive.
func (d *dbFlags) check() error {
	switch {
	case d.dsn == "":
		return errNoDB
	case d.timeout <= 0:
		return errors.New("--db-timeout must be positive")
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

// String joins the values with commas.
func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set adds a value.
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// durationValue is a duration flag whose error says how to write one.
type durationValue struct{ d *time.Duration }

// durationVar defines a duration flag on fs.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}

// String shows the duration.
func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

// Set reads a duration, such as 30s, 2m or 1h30m.
func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration: write a number and a unit, such as 30s, 2m or 1h30m")
	}
	*v.d = d
	return nil
}

// prefixList is a repeatable flag of IP prefixes (or addresses), each
// value a comma-separated list.
type prefixList []netip.Prefix

// String joins the prefixes with commas.
func (l *prefixList) String() string {
	parts := make([]string, len(*l))
	for i, p := range *l {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// Set adds the prefixes (or addresses, as /32 or /128) of a
// comma-separated list.
func (l *prefixList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("%q is not an IP address or prefix: write one such as 10.0.0.5 or 10.0.0.0/24", part)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		*l = append(*l, p.Masked())
	}
	return nil
}
