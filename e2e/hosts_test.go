package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Hosts that cannot run sandboxes must be told apart, in the words the
// owner sees: the self-test does not pass and its reasons name the cause
// and the fix (sandbox/hostcheck). These are the ones this machine can
// produce; user namespaces switched off by sysctl are produced in the VM
// guest.

// noNamespacesEnv makes this test binary install a seccomp filter that
// refuses new namespaces, as a container's default profile does, and then
// execute the program and arguments that follow in os.Args.
const noNamespacesEnv = "E2E_EXEC_WITHOUT_NAMESPACES"

// execWithoutNamespaces is the test binary's other life (see TestMain).
func execWithoutNamespaces() {
	runtime.LockOSThread()
	if err := refuseNamespaces(); err != nil {
		os.Stderr.WriteString("refuse namespaces: " + err.Error() + "\n")
		os.Exit(125)
	}
	argv := os.Args[1:]
	err := unix.Exec(argv[0], argv, os.Environ())
	os.Stderr.WriteString("exec: " + err.Error() + "\n")
	os.Exit(126)
}

// refuseNamespaces installs, for this process and all it starts, a filter
// that fails unshare and a clone asking for a user namespace with EPERM,
// and clone3 (whose flags a filter cannot read) with ENOSYS, so that
// callers fall back to clone.
func refuseNamespaces() error {
	if runtime.GOARCH != "amd64" {
		return nil // the numbers below are x86_64's; other machines skip in the test
	}
	const (
		sysClone, sysUnshare, sysClone3 = 56, 272, 435
		retAllow                        = unix.SECCOMP_RET_ALLOW
		retEPERM                        = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		retENOSYS                       = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 0, Size: 4}, // nr
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: sysUnshare, SkipTrue: 5},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: sysClone3, SkipTrue: 5},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: sysClone, SkipFalse: 2},
		bpf.LoadAbsolute{Off: 16, Size: 4}, // args[0], the flags (low half)
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.CLONE_NEWUSER, SkipTrue: 1},
		bpf.RetConstant{Val: retAllow},
		bpf.RetConstant{Val: retEPERM},
		bpf.RetConstant{Val: retENOSYS},
	})
	if err != nil {
		return err
	}
	filters := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filters[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
}

// selftestResult is what `codes-sandbox selftest --json` prints.
type selftestResult struct {
	Checks  map[string]bool `json:"checks"`
	NotRun  []string        `json:"not_run"`
	Reasons []string        `json:"reasons"`
	Passed  bool            `json:"passed"`
}

func TestHostsThatCannotRunSandboxes(t *testing.T) {
	bin := binaries(t)
	worker := filepath.Join(bin, "codes-sandbox")
	for _, tc := range []struct {
		name string
		cmd  func() *exec.Cmd
		want []string // in the reasons
	}{
		{"NoSysAdmin", func() *exec.Cmd {
			return exec.Command("setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--", worker, "selftest", "--json", "--browser", "off")
		}, []string{"the worker lacks CAP_SYS_ADMIN", "--cap-add SYS_ADMIN"}},
		{"ContainerSeccomp", func() *exec.Cmd {
			if runtime.GOARCH != "amd64" {
				t.Skip("the test's filter has x86_64's syscall numbers")
			}
			c := exec.Command(os.Args[0], worker, "selftest", "--json", "--browser", "off")
			c.Env = append(os.Environ(), noNamespacesEnv+"=1")
			return c
		}, []string{"the seccomp filter the worker runs under refuses the namespaces every sandbox needs",
			"(clone with CLONE_NEWUSER, CLONE_NEWNS…: operation not permitted)", "--security-opt seccomp=/usr/share/codes-sandbox/seccomp.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := tc.cmd()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err == nil {
				t.Fatalf("the self-test passed on a host that cannot run sandboxes: %s", out)
			}
			var res selftestResult
			if jerr := json.Unmarshal(out, &res); jerr != nil {
				t.Fatalf("%v: %v\nstdout %s\nstderr %s", err, jerr, out, stderr.String())
			}
			reasons := strings.Join(res.Reasons, "\n")
			for _, w := range tc.want {
				if !strings.Contains(reasons, w) {
					t.Errorf("reasons do not say %q:\n%s", w, reasons)
				}
			}
			if res.Passed || len(res.NotRun) == 0 {
				t.Errorf("result %+v: want failed, with the checks that need a sandbox not run", res)
			}
		})
	}
}
