package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// db is the store's pool with every error its statements return
// classified by storageError, so that a method fails with
// live.EUNAVAILABLE, saying why, when the database server rather than the
// request is at fault. (A transaction's errors are classified by inTx.)
type db struct{ *pgxpool.Pool }

// Exec runs a statement.
func (d db) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := d.Pool.Exec(ctx, sql, args...)
	return tag, storageError(err)
}

// Query runs a query; its rows' Err is classified too.
func (d db) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.Pool.Query(ctx, sql, args...)
	if err != nil {
		return rows, storageError(err)
	}
	return classifiedRows{rows}, nil
}

// QueryRow runs a query of one row, whose Scan's error is classified.
func (d db) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifiedRow{d.Pool.QueryRow(ctx, sql, args...)}
}

type classifiedRows struct{ pgx.Rows }

func (r classifiedRows) Err() error { return storageError(r.Rows.Err()) }

type classifiedRow struct{ pgx.Row }

func (r classifiedRow) Scan(dest ...any) error { return storageError(r.Row.Scan(dest...)) }
