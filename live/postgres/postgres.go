// Package postgres is the live.Store for several Live instances behind a load
// balancer: PostgreSQL through a pgx/v5 pool.
//
// Every time the store records (receive times, refusals, creation and
// revocation) is the database's clock, taken in the statement that writes it
// and returned with RETURNING, so instances on different machines agree.
// Check-ins arriving together share one statement (a multi-row upsert that
// also records their transitions), committed (synchronous_commit as the
// server is configured, durable by default) before Accept returns.
// Migrations are embedded and applied under an advisory lock, so instances
// that start together apply each migration once.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"openvibe.network/agentsandbox/live"
)

// Options configures a Store.
type Options struct {
	// Schema, when set, is the schema the store creates (if needed) and
	// works in (search_path on every connection); empty means the DSN's or
	// the server's search_path (usually public). Tests use a unique schema.
	Schema string
	// MaxConns bounds the pool; 0 means the DSN's pool_max_conns, or else
	// DefaultMaxConns.
	MaxConns int32
	// Window is the alive window by which Accept and Refuse record
	// transitions (see live.AcceptTransitions); 0 means live.AliveWindow.
	Window time.Duration
	// HistoryMaxAge and HistoryMaxRows bound each stream's history; 0 means
	// live.HistoryMaxAge and live.HistoryMaxRows.
	HistoryMaxAge  time.Duration
	HistoryMaxRows int
	// ReadOnly opens an existing, migrated schema for reading only: it
	// never creates a schema or tables (Open fails instead, saying so), and
	// every write fails with live.EUNAVAILABLE.
	ReadOnly bool
	// Acceptors is how many batches of check-ins may be written at once;
	// 0 means DefaultAcceptors.
	Acceptors int
	// ConnectTimeout bounds each new connection (its TCP connect, TLS and
	// start-up: a server that accepts and never answers fails it); 0 means
	// the DSN's connect_timeout, or else DefaultConnectTimeout.
	ConnectTimeout time.Duration
}

// DefaultConnectTimeout bounds a new connection by default.
const DefaultConnectTimeout = 5 * time.Second

// DefaultAcceptors is how many batches of check-ins are written at once by
// default. One: batches of concurrent check-ins mostly touch the same rows,
// so a second batch would only wait for the first's row locks and then pay
// its own commit; with one, the next batch gathers while the first commits
// (scripts/bench-live.sh, two builds interleaved over 3 rounds: 5.4k
// check-ins/s with p99 51 ms with 1, 4.7k/s with p99 101 ms with 4).
const DefaultAcceptors = 1

// Store is a live.Store on PostgreSQL. It is safe for concurrent use, and
// any number of Stores (in any number of processes) may share one database
// and schema.
type Store struct {
	pool   db
	window time.Duration
	// historyAge and historyRows bound each stream's history.
	historyAge  time.Duration
	historyRows int
	readOnly    bool
	accepts     chan acceptOp // buffered: a check-in waits once, for its answer
	quit        chan struct{}
	stopped     chan struct{} // closed when the acceptors have returned
	acceptors   sync.WaitGroup
	closer      sync.Once
}

// errClosed is returned by writes on a closed store.
var errClosed = errors.New("store is closed")

var _ live.Store = (*Store)(nil)

// DefaultMaxConns is the pool size when neither Options nor the DSN sets
// one: a check-in makes several short queries, and many arrive at once.
func DefaultMaxConns() int32 { return int32(max(16, 4*runtime.NumCPU())) }

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open connects to the database at dsn (a postgres:// URL or key=value
// string), creates opts.Schema if set and applies the embedded migrations.
// It fails on a bad DSN or schema name, or if the database cannot be
// reached or migrated; ctx bounds the opening only (give it a deadline: a
// server that accepts connections and never answers is otherwise waited
// for as long as ctx lasts, ConnectTimeout for each connection).
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if opts.Schema != "" {
		if !schemaPattern.MatchString(opts.Schema) {
			return nil, fmt.Errorf("open postgres store: schema %q must match %s", opts.Schema, schemaPattern)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns()
	}
	switch {
	case opts.ConnectTimeout > 0:
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	case cfg.ConnConfig.ConnectTimeout == 0:
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	st := &Store{pool: db{pool}, window: opts.Window, readOnly: opts.ReadOnly, accepts: make(chan acceptOp, maxBatch), quit: make(chan struct{}), stopped: make(chan struct{})}
	if st.window == 0 {
		st.window = live.AliveWindow
	}
	st.historyAge, st.historyRows = cmp.Or(opts.HistoryMaxAge, live.HistoryMaxAge), cmp.Or(opts.HistoryMaxRows, live.HistoryMaxRows)
	if opts.ReadOnly {
		err = checkSchema(ctx, pool, opts.Schema, describeDSN(cfg))
	} else {
		err = migrate(ctx, pool, opts.Schema)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if !opts.ReadOnly {
		n := opts.Acceptors
		if n <= 0 {
			n = DefaultAcceptors
		}
		for range n {
			st.acceptors.Add(1)
			go st.acceptor()
		}
	}
	return st, nil
}

// describeDSN names the database of cfg for a person, without a password.
func describeDSN(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// Close stops the check-in batches after the ones being written (a check-in
// still queued then fails: it was never written) and closes the pool,
// waiting for connections in use. Later calls return nil.
func (s *Store) Close() error {
	s.closer.Do(func() {
		close(s.quit)
		s.acceptors.Wait()
		close(s.stopped)
		s.pool.Close()
	})
	return nil
}

// writable returns EUNAVAILABLE for a store opened read-only.
func (s *Store) writable() error {
	if s.readOnly {
		return live.Errorf(live.EUNAVAILABLE, "the store was opened read-only")
	}
	return nil
}

// utc returns t in UTC (pgx returns the local zone).
func utc(t time.Time) time.Time { return t.UTC() }

// utcPtr returns *t in UTC, or nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
