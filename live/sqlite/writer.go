package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"time"

	"openvibe.network/agentsandbox/live"
)

// maxBatch bounds how many writes share one transaction.
const maxBatch = 256

// errClosed is returned by writes on a closed store.
var errClosed = errors.New("store is closed")

// errReadOnly is returned by writes on a store opened read-only.
var errReadOnly = live.Errorf(live.EUNAVAILABLE, "the store was opened read-only")

// execer is the part of the writer's connection that a write uses.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// writeOp is one write waiting for the writer: fn runs inside the group's
// transaction and may run several statements; it may be run twice (see
// commit), so it sets its results afresh each time. Its error (or the
// commit's) goes to done. An op with an epoch runs only if the auth epoch
// is still that (else it fails with live.ErrAuthChanged); an op that
// keepsAuth never moves the epoch. ctx is its caller's: an op whose ctx has
// ended by the time the writer takes it is not run, and a group waits for
// the database's write lock only until the last of its ops' deadlines.
type writeOp struct {
	ctx       context.Context
	fn        func(ctx context.Context, q execer) error
	done      chan error
	epoch     int64
	keepsAuth bool
}

// write hands fn to the writer and waits until its group is committed.
// Once fn is queued for the writer, write waits for the outcome even if ctx
// ends, so the caller never misreads a committed write as failed.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, q execer) error) error {
	return s.submit(ctx, writeOp{fn: fn})
}

// writeKeepingAuth is write for an fn that never moves the auth epoch,
// which, when epoch is not 0, runs only while the epoch is epoch.
func (s *Store) writeKeepingAuth(ctx context.Context, epoch int64, fn func(ctx context.Context, q execer) error) error {
	return s.submit(ctx, writeOp{fn: fn, epoch: epoch, keepsAuth: true})
}

func (s *Store) submit(ctx context.Context, op writeOp) error {
	if s.ops == nil {
		return errReadOnly
	}
	op.ctx = ctx
	op.done = make(chan error, 1)
	select {
	case s.ops <- op: // the queue has room: no need to watch ctx (or make its channel)
	default:
		select {
		case s.ops <- op:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.quit:
			return errClosed
		}
	}
	// The queue is buffered, so that a write costs its caller one wait, not
	// two. A write still queued when the writer stops (Close) was never run.
	select {
	case err := <-op.done:
		return err
	case <-s.done:
		select {
		case err := <-op.done: // answered before the writer stopped
			return err
		default:
			return errClosed
		}
	}
}

// writer is the one goroutine that writes: it takes the writes waiting now
// and commits them as one group, until Close.
func (s *Store) writer() {
	defer close(s.done)
	batch := make([]writeOp, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case op := <-s.ops:
			batch = take(batch, op)
		case <-s.quit:
			return
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case op := <-s.ops:
				batch = take(batch, op)
			default:
				break gather
			}
		}
		if len(batch) == 0 {
			continue
		}
		s.commit(batch)
		// commit readied the group's callers on this P, behind the writer:
		// let them run (and answer their clients) before the next group,
		// whose callers are already waiting in the queue for the writer.
		runtime.Gosched()
	}
}

// take adds op to batch, or answers it at once when its caller has given up
// already (it is never run then).
func take(batch []writeOp, op writeOp) []writeOp {
	if err := op.ctx.Err(); err != nil {
		op.done <- fmt.Errorf("write: %w", err)
		return batch
	}
	return append(batch, op)
}

// lockContext is the context in which a group waits for the database's
// write lock: until the last of its ops' deadlines, or (when one has none)
// the busy timeout alone. Its cancel func must be called.
func lockContext(batch []writeOp) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, op := range batch {
		d, ok := op.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(context.Background(), last)
}

// commit runs batch in one transaction and answers every op. It first runs
// the ops one after the other with nothing between them; if one fails
// (rare: the callers checked their input), it rolls the whole group back and
// runs it again with each op in its own savepoint, so that a failing op
// leaves the others untouched. A failed commit fails every op that had
// succeeded.
func (s *Store) commit(batch []writeOp) {
	ctx := context.Background()
	lockCtx, cancel := lockContext(batch)
	defer cancel()
	errs := make([]error, len(batch))
	failed := false
	err := s.inTx(lockCtx, func(w *wconn) error {
		var ep epochCheck
		for i, op := range batch {
			if errs[i] = ep.check(ctx, w, op); errs[i] != nil {
				continue
			}
			if errs[i] = op.fn(ctx, w); errs[i] != nil {
				failed = true
				return errs[i]
			}
		}
		return nil
	})
	if failed && len(batch) > 1 {
		clear(errs)
		err = s.inTx(lockCtx, func(w *wconn) error {
			var ep epochCheck
			for i, op := range batch {
				if errs[i] = ep.check(ctx, w, op); errs[i] == nil {
					errs[i] = inSavepoint(ctx, w, op.fn)
				}
			}
			return nil
		})
	}
	for i, op := range batch {
		if errs[i] == nil {
			errs[i] = err
		}
		op.done <- storageError(errs[i])
	}
}

// epochCheck checks the ops of one transaction against the auth epoch,
// read once and again only after an op that may have moved it.
type epochCheck struct {
	epoch int64
	known bool
}

// check returns live.ErrAuthChanged (wrapped) when op has an epoch that is
// no longer the store's; it reads the epoch when it must.
func (e *epochCheck) check(ctx context.Context, w *wconn, op writeOp) error {
	defer func() {
		if !op.keepsAuth {
			e.known = false
		}
	}()
	if op.epoch == 0 {
		return nil
	}
	if !e.known {
		if err := w.QueryRowContext(ctx, "SELECT v FROM auth_epoch WHERE id = 1").Scan(&e.epoch); err != nil {
			return fmt.Errorf("write: read auth epoch: %w", err)
		}
		e.known = true
	}
	if e.epoch != op.epoch {
		return fmt.Errorf("write: %w", live.ErrAuthChanged)
	}
	return nil
}

// inTx runs fn between BEGIN IMMEDIATE and COMMIT on the writer's
// connection; it rolls back when fn fails. lockCtx bounds only the wait for
// the write lock (BEGIN IMMEDIATE): once the group holds it, it runs to its
// end, so that no caller misreads a committed write as failed.
func (s *Store) inTx(lockCtx context.Context, fn func(w *wconn) error) error {
	ctx := context.Background()
	w := s.wconn
	if _, err := w.ExecContext(lockCtx, "BEGIN IMMEDIATE"); err != nil {
		if cerr := lockCtx.Err(); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return fmt.Errorf("write: begin: %w", err)
	}
	if err := fn(w); err != nil {
		_, _ = w.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := w.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = w.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("write: commit: %w", err)
	}
	return nil
}

// inSavepoint runs fn so that its failure undoes only its own changes.
func inSavepoint(ctx context.Context, conn *wconn, fn func(ctx context.Context, q execer) error) error {
	if _, err := conn.ExecContext(ctx, "SAVEPOINT op"); err != nil {
		return fmt.Errorf("write: savepoint: %w", err)
	}
	ferr := fn(ctx, conn)
	if ferr != nil {
		if _, err := conn.ExecContext(ctx, "ROLLBACK TO op"); err != nil {
			return errors.Join(ferr, fmt.Errorf("write: rollback to savepoint: %w", err))
		}
	}
	if _, err := conn.ExecContext(ctx, "RELEASE op"); err != nil {
		return errors.Join(ferr, fmt.Errorf("write: release savepoint: %w", err))
	}
	return ferr
}

// wconn is the writer's one connection, with its statements prepared once.
// Only the writer goroutine uses it.
type wconn struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
}

func (w *wconn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}

// ExecContext runs query as a prepared statement.
func (w *wconn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := w.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryRowContext runs query as a prepared statement. A failed prepare
// surfaces from the row's Scan.
func (w *wconn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := w.stmt(ctx, query)
	if err != nil {
		return w.conn.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// QueryContext runs query as a prepared statement.
func (w *wconn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := w.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// close releases the statements and the connection.
func (w *wconn) close() error {
	var errs []error
	for _, st := range w.stmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(append(errs, w.conn.Close())...)
}
