package migrations

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

func file(text string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(text)} }

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
		want string // the names in order, then each one's SQL
		err  string // what the error must say, when Load must fail
	}{
		{"OK", fstest.MapFS{"m/010_b.sql": file("B"), "m/002_a.sql": file("A")}, "002_a.sql=A 010_b.sql=B", ""},
		{"OKEmpty", fstest.MapFS{"m": &fstest.MapFile{Mode: fs.ModeDir}}, "", ""},
		{"ErrName", fstest.MapFS{"m/init.sql": file("")}, "", "name must be NNN_name.sql"},
		{"ErrNoNumber", fstest.MapFS{"m/x_init.sql": file("")}, "", "name must be NNN_name.sql"},
		{"ErrSameVersion", fstest.MapFS{"m/1_a.sql": file(""), "m/001_b.sql": file("")}, "", "same version 1"},
		{"ErrNoDir", fstest.MapFS{"other/001_a.sql": file("")}, "", "load migrations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := Load(tc.fsys, "m")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Load = %v, %v; want an error saying %q", ms, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, m.Name+"="+m.SQL)
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("Load = %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}
