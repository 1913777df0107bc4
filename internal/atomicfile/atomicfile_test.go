package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// state is what a directory holds after a Write: each file's name, mode and
// content.
type state struct {
	Name    string
	Mode    os.FileMode
	Content string
}

func readDir(t *testing.T, dir string) []state {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []state
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, state{e.Name(), info.Mode().Perm(), string(b)})
	}
	return out
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []state // files present before the Write
		data   string
		perm   os.FileMode
		want   []state
	}{
		{"OKNew", nil, "127.0.0.1:8080\n", 0o644, []state{{"f", 0o644, "127.0.0.1:8080\n"}}},
		{"OKPrivate", nil, "secret", 0o600, []state{{"f", 0o600, "secret"}}},
		{"OKReplaces", []state{{"f", 0o600, "old content, longer"}}, "new", 0o640, []state{{"f", 0o640, "new"}}},
		{"OKEmpty", nil, "", 0o644, []state{{"f", 0o644, ""}}},
		{"OKLeavesOthers", []state{{"g", 0o600, "other"}}, "x", 0o644, []state{{"f", 0o644, "x"}, {"g", 0o600, "other"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, s := range tc.before {
				if err := os.WriteFile(filepath.Join(dir, s.Name), []byte(s.Content), s.Mode); err != nil {
					t.Fatal(err)
				}
			}
			if err := Write(filepath.Join(dir, "f"), []byte(tc.data), tc.perm); err != nil {
				t.Fatal(err)
			}
			if got := readDir(t, dir); !slices.Equal(got, tc.want) {
				t.Fatalf("directory holds %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWriteRelative writes a path without a directory part (the current
// directory).
func TestWriteRelative(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := Write("addr", []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := readDir(t, dir), []state{{"addr", 0o644, "a"}}; !slices.Equal(got, want) {
		t.Fatalf("directory holds %+v, want %+v", got, want)
	}
}

// TestWriteErrors: a failed Write says what failed and leaves nothing
// behind.
func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "keep"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"ErrNoDirectory", filepath.Join(dir, "missing", "f"), "create temporary file"},
		{"ErrTargetIsDirectory", filepath.Join(dir, "sub"), "rename"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(tc.path, []byte("x"), 0o644)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("Write(%s) = %v, want an error naming the path and %q", tc.path, err, tc.want)
			}
			want := []state{{"keep", 0o600, "k"}}
			if got := readDir(t, filepath.Join(dir, "sub")); !slices.Equal(got, want) {
				t.Fatalf("sub holds %+v, want %+v", got, want)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Fatalf("%s holds %d entries, want only sub (a temporary file was left?)", dir, len(entries))
			}
		})
	}
}
