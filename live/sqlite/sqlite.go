// Package sqlite is the embedded live.Store: one SQLite file in WAL mode,
// through the pure-Go modernc.org/sqlite driver.
//
// Every write goes through one writer goroutine that commits in groups: it
// takes all the writes waiting at that moment, runs them in one transaction,
// commits with synchronous=FULL, and only then answers each caller (when one
// of them fails, the group is rolled back and run again with each write in
// its own savepoint, so the failure is that write's alone). A write is
// therefore durable when its method returns, and concurrent check-ins share
// one fsync. Reads use a separate pool of query-only connections, which WAL
// lets run beside the writer. The database file is created with mode 0600
// (SQLite gives its -wal and -shm files the same mode).
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"openvibe.network/agentsandbox/live"
)

// Options configures a Store.
type Options struct {
	// Now is the store's clock: it gives the receive time of Accept, the At
	// of Refuse, CreatedAt and RevokedAt. Nil means time.Now.
	Now func() time.Time
	// Window is the alive window by which Accept and Refuse record
	// transitions (see live.AcceptTransitions); 0 means live.AliveWindow.
	Window time.Duration
	// HistoryMaxAge and HistoryMaxRows bound each stream's history; 0 means
	// live.HistoryMaxAge and live.HistoryMaxRows.
	HistoryMaxAge  time.Duration
	HistoryMaxRows int
	// ReadOnly opens an existing, migrated database for reading only: it
	// never creates or migrates one (Open fails instead, saying so), and
	// every write fails with live.EUNAVAILABLE.
	ReadOnly bool
}

// Store is a live.Store on one SQLite file. It is safe for concurrent use;
// several processes may open the same file (SQLite's locks and the busy
// timeout serialise their writers).
type Store struct {
	now    func() time.Time
	window time.Duration
	// historyAge and historyRows bound each stream's history.
	historyAge  time.Duration
	historyRows int
	path        string
	wdb         *sql.DB // one connection, used only by the writer goroutine (nil when read-only)
	wconn       *wconn  // that connection
	rdb         *sql.DB // query-only pool
	rstmts      sync.Map
	known       map[string]known // the writer's own: see accept
	ops         chan writeOp
	quit        chan struct{}
	done        chan struct{}
	closer      sync.Once
}

var _ live.Store = (*Store)(nil)

// busyTimeoutMS is how long a connection waits for another process's lock.
const busyTimeoutMS = 10000

// Open opens (creating it if needed, with mode 0600) the SQLite database at
// path, applies the embedded migrations and starts the writer; with
// opts.ReadOnly see Options. It fails if the file cannot be opened or
// migrated; ctx bounds the opening only.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open sqlite store: path %q must be non-empty and contain no '?' or '#'", path)
	}
	s := &Store{now: opts.Now, window: opts.Window, path: path, known: map[string]known{}, quit: make(chan struct{}), done: make(chan struct{})}
	if s.now == nil {
		s.now = time.Now
	}
	if s.window == 0 {
		s.window = live.AliveWindow
	}
	s.historyAge, s.historyRows = cmp.Or(opts.HistoryMaxAge, live.HistoryMaxAge), cmp.Or(opts.HistoryMaxRows, live.HistoryMaxRows)
	if opts.ReadOnly {
		return s, s.openReadOnly(ctx)
	}
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	var err error
	s.wdb, err = sql.Open("sqlite", s.dsn("&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxIdleTime(0)
	if err := migrate(ctx, s.wdb); err != nil {
		_ = s.wdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if err := s.openReaders(ctx); err != nil {
		_ = s.wdb.Close()
		return nil, err
	}
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		_ = s.wdb.Close()
		_ = s.rdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	s.wconn = &wconn{conn: conn, stmts: map[string]*sql.Stmt{}}
	s.ops = make(chan writeOp, maxBatch)
	go s.writer()
	return s, nil
}

// dsn is the database's URI with the common parameters and extra.
func (s *Store) dsn(extra string) string {
	// SQLite decodes %HH in a file: URI, so a literal % is written %25.
	uri := "file:" + strings.ReplaceAll(s.path, "%", "%25")
	return fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)%s", uri, busyTimeoutMS, extra)
}

// openReaders opens the query-only pool.
func (s *Store) openReaders(ctx context.Context) error {
	var err error
	s.rdb, err = sql.Open("sqlite", s.dsn("&_pragma=query_only(1)"))
	if err != nil {
		return fmt.Errorf("open sqlite store: %w", err)
	}
	readers := max(4, 2*runtime.NumCPU())
	s.rdb.SetMaxOpenConns(readers)
	s.rdb.SetMaxIdleConns(readers)
	if err := s.rdb.PingContext(ctx); err != nil {
		_ = s.rdb.Close()
		return fmt.Errorf("open sqlite store %s: %w", s.path, err)
	}
	return nil
}

// openReadOnly opens only the readers, on a database that exists and is
// migrated; the writer never runs (s.ops stays nil).
func (s *Store) openReadOnly(ctx context.Context) error {
	if _, err := os.Stat(s.path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no database at %s: it is created by `ovlive serve` or by an admin command that writes, such as `person add`", s.path)
		}
		return fmt.Errorf("open sqlite store: %w", err)
	}
	if err := s.openReaders(ctx); err != nil {
		return err
	}
	close(s.done)
	have, err := schemaVersion(ctx, s.rdb)
	if err == nil {
		err = checkVersion(have)
	}
	if err != nil {
		_ = s.rdb.Close()
		return fmt.Errorf("open sqlite store %s: %w", s.path, err)
	}
	return nil
}

// createPrivate creates an empty file at path with mode 0600 unless a file
// is there already.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	return f.Close()
}

// Close stops the writer after the group it is writing and closes the
// database; a write still queued then fails (it was never run). Later calls
// return nil.
func (s *Store) Close() error {
	var err error
	s.closer.Do(func() {
		close(s.quit)
		<-s.done
		s.rstmts.Range(func(_, st any) bool {
			err = errors.Join(err, st.(*sql.Stmt).Close())
			return true
		})
		if s.wdb != nil {
			err = errors.Join(err, s.wconn.close(), s.wdb.Close())
		}
		err = errors.Join(err, s.rdb.Close())
		if err != nil {
			err = fmt.Errorf("close sqlite store: %w", err)
		}
	})
	return err
}

// nanos is how times are stored: Unix nanoseconds.
func nanos(t time.Time) int64 { return t.UnixNano() }

// fromNanos is the inverse of nanos, in UTC.
func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// nullNanos stores an optional time.
func nullNanos(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: nanos(*t), Valid: true}
}

// fromNullNanos reads an optional time.
func fromNullNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

// readRow runs query on the read pool as a statement prepared once (and
// then once per connection). A failed prepare surfaces from the row's Scan.
// The point reads it serves take microseconds, so they are not cancelled:
// the driver would otherwise start a goroutine per query to watch ctx.
func (s *Store) readRow(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	st, err := s.readStmt(ctx, query)
	if err != nil {
		return s.rdb.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func (s *Store) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.rstmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.rdb.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.rstmts.LoadOrStore(query, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}
