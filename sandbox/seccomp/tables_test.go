//go:build linux

package seccomp

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/internal/testenv"
)

// amd64Program pins the x86_64 filter with Options{}: the SHA-256 and
// length of its raw bytes (last changed by the prlimit64 check, the AIO refusals and
// the socket rules). A change to the x86_64 filter must change these on purpose.
const (
	amd64ProgramSHA256 = "1876e65c1481cae8305dcc9d2e8826f5737f5758dba97e0d5feb5ae71fac126d"
	amd64ProgramLen    = 1488
)

// TestAMD64ProgramPinned checks the x86_64 filter is byte for byte the one
// pinned, on any GOARCH; on amd64, that Program returns it.
func TestAMD64ProgramPinned(t *testing.T) {
	prog, err := program(&x86_64, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(prog)
	if got := hex.EncodeToString(sum[:]); got != amd64ProgramSHA256 || len(prog) != amd64ProgramLen {
		t.Fatalf("x86_64 filter: %d bytes, sha256 %s; pinned %d bytes, %s", len(prog), got, amd64ProgramLen, amd64ProgramSHA256)
	}
	if runtime.GOARCH != "amd64" {
		return
	}
	native, err := Program(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(native) != string(prog) {
		t.Fatal("Program(Options{}) on amd64 is not the x86_64 table's filter")
	}
}

// TestProgramSelectsTable checks Program picks the table of runtime.GOARCH
// and that the arm64 filter differs from the x86_64 one where it must.
func TestProgramSelectsTable(t *testing.T) {
	tab := native()
	if tab == nil {
		if _, err := Program(Options{}); err != ErrUnsupported {
			t.Fatalf("Program on %s: %v, want ErrUnsupported", runtime.GOARCH, err)
		}
		return
	}
	got, err := Program(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := program(tab, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("Program on %s is not its table's filter", runtime.GOARCH)
	}
	if tableFor("linux", "riscv64") != nil || tableFor("darwin", "arm64") != nil {
		t.Fatal("a table for a platform the policy does not cover")
	}
}

// TestTableWithoutNumberRefused checks a table that lacks the number of an
// argument-filtered syscall is an error, not a filter on syscall 0.
func TestTableWithoutNumberRefused(t *testing.T) {
	broken := x86_64
	broken.nr = map[string]uint32{}
	for k, v := range x86_64.nr {
		if k != "ioctl" {
			broken.nr[k] = v
		}
	}
	if _, err := program(&broken, Options{}); err == nil {
		t.Fatal("a table without ioctl's number assembled")
	}
}

// xsysDir returns the directory of golang.org/x/sys/unix in the module
// cache, or skips (fails in CI) when the go command cannot say.
func xsysDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		testenv.Missing(t, "the source of golang.org/x/sys (go list -m: "+strings.TrimSpace(errText(err))+"); run in the module")
	}
	return filepath.Join(dir, "unix")
}

func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return err.Error() + ": " + string(ee.Stderr)
	}
	if err != nil {
		return err.Error()
	}
	return "no directory"
}

// constants returns the NAME = value constants of a golang.org/x/sys/unix
// source file.
func constants(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	re := regexp.MustCompile(`^\s+([A-Z][A-Z0-9_]*)\s+= (0x[0-9a-f]+|[0-9]+)$`)
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			v, err := strconv.ParseUint(m[2], 0, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[m[1]] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTablesMatchXSys checks every number of every table (and the tests'
// own) against golang.org/x/sys/unix's generated files for that GOARCH,
// read from the module's source, so the arm64 table is checked on amd64:
// syscall numbers, the absent calls, the audit arch and the ioctls.
func TestTablesMatchXSys(t *testing.T) {
	dir := xsysDir(t)
	common := constants(t, filepath.Join(dir, "zerrors_linux.go"))
	forEachTable(t, func(t *testing.T, tab *table) {
		nums := constants(t, filepath.Join(dir, "zsysnum_linux_"+tab.goarch+".go"))
		errs := constants(t, filepath.Join(dir, "zerrors_linux_"+tab.goarch+".go"))
		check := func(name string, got uint32) {
			want, ok := nums["SYS_"+strings.ToUpper(name)]
			if !ok || uint64(got) != want {
				t.Errorf("%s: %d, x/sys says %d (known %v)", name, got, want, ok)
			}
		}
		for name, nr := range tab.nr {
			check(name, nr)
		}
		for name, nr := range testNumbers[tab.goarch] {
			check(name, nr)
		}
		for _, name := range tab.absent {
			if v, ok := nums["SYS_"+strings.ToUpper(name)]; ok {
				t.Errorf("%s is declared absent, but x/sys numbers it %d", name, v)
			}
		}
		wantArch := map[string]string{"amd64": "AUDIT_ARCH_X86_64", "arm64": "AUDIT_ARCH_AARCH64"}[tab.goarch]
		if uint64(tab.audit) != common[wantArch] || wantArch == "" {
			t.Errorf("audit arch %#x, x/sys %s = %#x", tab.audit, wantArch, common[wantArch])
		}
		for i, name := range []string{"TIOCSTI", "TIOCLINUX"} {
			if len(tab.deniedIoctls) != 2 || uint64(tab.deniedIoctls[i]) != errs[name] {
				t.Errorf("deniedIoctls %#x, want %s = %#x at %d", tab.deniedIoctls, name, errs[name], i)
			}
		}
	})
}
