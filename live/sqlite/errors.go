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
