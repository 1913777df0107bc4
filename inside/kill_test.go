package inside

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestTreeOf: the tree of a command is its session, its process group and
// every descendant wherever it moved; never pid 1 or another command's.
func TestTreeOf(t *testing.T) {
	procs := []proc{
		{pid: 1, ppid: 0, pgid: 1, sid: 1},
		{pid: 10, ppid: 1, pgid: 10, sid: 10},  // the leader
		{pid: 11, ppid: 10, pgid: 10, sid: 10}, // a child
		{pid: 12, ppid: 10, pgid: 12, sid: 12}, // a child that called setsid
		{pid: 13, ppid: 12, pgid: 13, sid: 12}, // its child, in a group of its own
		{pid: 14, ppid: 1, pgid: 10, sid: 10},  // an orphan still in the session
		{pid: 20, ppid: 1, pgid: 20, sid: 20},  // another command
		{pid: 21, ppid: 20, pgid: 20, sid: 20},
	}
	got := treeOf(procs, 10)
	slices.Sort(got)
	if want := []int{10, 11, 12, 13, 14}; !slices.Equal(got, want) {
		t.Fatalf("treeOf = %v, want %v", got, want)
	}
}

func TestReadStat(t *testing.T) {
	root := t.TempDir()
	write := func(pid int, stat string) {
		d := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(7, "7 (a (tricky) name) S 3 7 5 0 -1")
	write(8, "8 (z) Z 7 7 5 0")
	write(9, "9 garbage")
	got := readProcs(root)
	slices.SortFunc(got, func(a, b proc) int { return a.pid - b.pid })
	want := []proc{{pid: 7, ppid: 3, pgid: 7, sid: 5}, {pid: 8, ppid: 7, pgid: 7, sid: 5, zombie: true}}
	if !slices.Equal(got, want) {
		t.Fatalf("readProcs = %+v, want %+v", got, want)
	}
}
