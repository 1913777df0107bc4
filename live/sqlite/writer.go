package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// maxBatch bounds how many writes share one transaction.
const maxBatch = 256

// errClosed is returned by writes on a closed store.
var errClosed = errors.New("store is closed")

// execer is the part of *sql.Conn a write uses.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// writeOp is one write waiting for the writer: fn runs inside the group's
// transaction, in its own savepoint; its error (or the commit's) goes to done.
type writeOp struct {
	fn   func(ctx context.Context, q execer) error
	done chan error
}

// write hands fn to the writer and waits until its group is committed. Once
// the writer has taken fn, write waits for the outcome even if ctx ends, so
// the caller never misreads a committed write as failed.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, q execer) error) error {
	op := writeOp{fn: fn, done: make(chan error, 1)}
	select {
	case s.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return errClosed
	}
	return <-op.done
}

// writer is the one goroutine that writes: it takes the writes waiting now
// and commits them as one group, until Close.
func (s *Store) writer() {
	defer close(s.done)
	batch := make([]writeOp, 0, maxBatch)
	for {
		select {
		case op := <-s.ops:
			batch = append(batch[:0], op)
		case <-s.quit:
			return
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case op := <-s.ops:
				batch = append(batch, op)
			default:
				break gather
			}
		}
		s.commit(batch)
	}
}

// commit runs batch in one transaction and answers every op. An op that
// fails is rolled back to its savepoint and leaves the others untouched; a
// failed commit fails every op that had succeeded.
func (s *Store) commit(batch []writeOp) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	err := s.inTx(ctx, func(conn *sql.Conn) error {
		for i, op := range batch {
			errs[i] = inSavepoint(ctx, conn, op.fn)
		}
		return nil
	})
	for i, op := range batch {
		if errs[i] == nil {
			errs[i] = err
		}
		op.done <- errs[i]
	}
}

// inTx runs fn between BEGIN IMMEDIATE and COMMIT on the writer's connection.
func (s *Store) inTx(ctx context.Context, fn func(conn *sql.Conn) error) error {
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("write: begin: %w", err)
	}
	if err := fn(conn); err != nil {
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("write: commit: %w", err)
	}
	return nil
}

// inSavepoint runs fn so that its failure undoes only its own changes.
func inSavepoint(ctx context.Context, conn *sql.Conn, fn func(ctx context.Context, q execer) error) error {
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
