// Package migrations reads the embedded schema changes that live/sqlite and
// live/postgres apply: files named NNN_name.sql, applied in version order.
// Each store applies them in its own transaction; this package only reads
// and orders them.
package migrations

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema change.
type Migration struct {
	// Version is the file name's leading number; Name the whole file name.
	Version int
	Name    string
	// SQL is the file's text.
	SQL string
}

// Load returns the migrations in directory dir of fsys in version order. It
// fails when dir cannot be read, a file name does not start with a number
// and an underscore, or two files have the same version.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	var ms []Migration
	seen := map[int]string{}
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("load migrations: %s: name must be NNN_name.sql", e.Name())
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("load migrations: %s and %s have the same version %d", other, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("load migrations: %w", err)
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}
