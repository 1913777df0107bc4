// Package sqlite is the embedded live.Store: one SQLite file in WAL mode,
// through the pure-Go modernc.org/sqlite driver.
//
// Every write goes through one writer goroutine that commits in groups: it
// takes all the writes waiting at that moment, runs each in its own
// savepoint inside one transaction, commits with synchronous=FULL, and only
// then answers each caller. A write is therefore durable when its method
// returns, and concurrent check-ins share one fsync. Reads use a separate
// pool of query-only connections, which WAL lets run beside the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
}

// Store is a live.Store on one SQLite file. It is safe for concurrent use;
// several processes may open the same file (SQLite's locks and the busy
// timeout serialise their writers).
type Store struct {
	now    func() time.Time
	wdb    *sql.DB // one connection, used only by the writer goroutine
	wconn  *wconn  // that connection
	rdb    *sql.DB // query-only pool
	rstmts sync.Map
	ops    chan writeOp
	quit   chan struct{}
	done   chan struct{}
	closer sync.Once
}

var _ live.Store = (*Store)(nil)

// busyTimeoutMS is how long a connection waits for another process's lock.
const busyTimeoutMS = 10000

// Open opens (creating it if needed) the SQLite database at path, applies the
// embedded migrations and starts the writer. It fails if the file cannot be
// opened or migrated; ctx bounds the opening only.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open sqlite store: path %q must be non-empty and contain no '?' or '#'", path)
	}
	s := &Store{now: opts.Now, ops: make(chan writeOp), quit: make(chan struct{}), done: make(chan struct{})}
	if s.now == nil {
		s.now = time.Now
	}
	// SQLite decodes %HH in a file: URI, so a literal % is written %25.
	uri := "file:" + strings.ReplaceAll(path, "%", "%25")
	common := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", uri, busyTimeoutMS)
	var err error
	s.wdb, err = sql.Open("sqlite", common+"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
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
	s.rdb, err = sql.Open("sqlite", common+"&_pragma=query_only(1)")
	if err != nil {
		_ = s.wdb.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	readers := max(4, 2*runtime.NumCPU())
	s.rdb.SetMaxOpenConns(readers)
	s.rdb.SetMaxIdleConns(readers)
	if err := s.rdb.PingContext(ctx); err != nil {
		_ = s.wdb.Close()
		_ = s.rdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		_ = s.wdb.Close()
		_ = s.rdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	s.wconn = &wconn{conn: conn, stmts: map[string]*sql.Stmt{}}
	go s.writer()
	return s, nil
}

// Close stops the writer after the writes already taken and closes the
// database. Later calls return nil.
func (s *Store) Close() error {
	var err error
	s.closer.Do(func() {
		close(s.quit)
		<-s.done
		s.rstmts.Range(func(_, st any) bool {
			err = errors.Join(err, st.(*sql.Stmt).Close())
			return true
		})
		err = errors.Join(err, s.wconn.close(), s.rdb.Close(), s.wdb.Close())
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
