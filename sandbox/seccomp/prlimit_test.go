//go:build linux

package seccomp

import "testing"

// TestPrlimitOthers: prlimit64 may set the caller's own limits and read
// anyone's, never set another process's.
func TestPrlimitOthers(t *testing.T) {
	const nofile, ptr = 7, 0x7ffc12345678
	forEachTable(t, func(t *testing.T, tab *table) {
		v := vm(t, tab, Options{})
		for _, tc := range []struct {
			name string
			call call
			want uint32
		}{
			{"SetOwnAllowed", sys(t, tab, "prlimit64", 0, nofile, ptr, 0), retAllow},
			{"GetOwnAllowed", sys(t, tab, "prlimit64", 0, nofile, 0, ptr), retAllow},
			{"GetOtherAllowed", sys(t, tab, "prlimit64", 1, nofile, 0, ptr), retAllow},
			{"SetOtherEPERM", sys(t, tab, "prlimit64", 1, nofile, ptr, 0), retEPERM},
			{"SetOtherHighPointerEPERM", sys(t, tab, "prlimit64", 1, nofile, 0x7fff_0000_0000, 0), retEPERM},
			{"SetOtherLowPointerEPERM", sys(t, tab, "prlimit64", 42, nofile, 0x1000, ptr), retEPERM},
			{"PidHighWordIgnored", sys(t, tab, "prlimit64", 1<<32, nofile, ptr, 0), retAllow},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if got := run(t, v, tc.call); got != tc.want {
					t.Fatalf("got %s, want %s", name(got), name(tc.want))
				}
			})
		}
	})
}
