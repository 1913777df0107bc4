package sqlite

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"openvibe.network/agentsandbox/live"
)

// sqliteCode returns the extended result code of err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// createError maps an insert's error: a taken primary key is ECONFLICT, a
// foreign key that points nowhere is EINVALID with fkMessage, a taken unique
// value ECONFLICT; anything else is wrapped.
func createError(what, id string, err error, fkMessage string) error {
	switch sqliteCode(err) {
	case 0:
		if live.ErrorCode(err) != live.EINTERNAL {
			return err
		}
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return live.Errorf(live.ECONFLICT, "%s %q already exists: choose another id", what, id)
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return live.Errorf(live.ECONFLICT, "%s %q: a %s with the same secret already exists", what, id, what)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return live.Errorf(live.EINVALID, "cannot create %s %q: %s", what, id, fkMessage)
	}
	return fmt.Errorf("create %s %s: %w", what, id, err)
}

// storageError makes an error of the database's storage itself (its disk
// full, an I/O error, the file made read-only, another process holding the
// lock past the busy timeout, no memory) live.StorageUnavailable, saying
// what the operator must fix; any other error is returned as it is.
func storageError(err error) error {
	if live.ErrorCode(err) != live.EINTERNAL { // nil, or classified already
		return err
	}
	var why string
	switch sqliteCode(err) & 0xff { // the primary result code
	case sqlite3.SQLITE_FULL:
		why = "the disk that holds it is full: free space there"
	case sqlite3.SQLITE_IOERR:
		why = "the disk that holds it failed a read or a write (an I/O error): check that disk"
	case sqlite3.SQLITE_READONLY:
		why = "its file cannot be written (a read-only file or file system): make it writable"
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		why = "another process has held its lock for longer than the busy timeout"
	case sqlite3.SQLITE_NOMEM:
		why = "Live ran out of memory"
	case sqlite3.SQLITE_CANTOPEN:
		why = "its files cannot be opened: check its directory's permissions and free space"
	default:
		return err
	}
	return live.StorageUnavailable(why, err)
}
