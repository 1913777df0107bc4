//go:build linux && amd64

package seccomp

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// call is one seccomp_data input.
type call struct {
	arch uint32
	nr   uint32
	args [6]uint64
}

// encode lays out struct seccomp_data for x/net/bpf's VM. The VM loads words
// big-endian while the kernel loads them native (little) endian, so each
// 32-bit word the filter may load is written big-endian at its native
// offset: the low word of args[i] at 16+8i, the high word after it.
func (c call) encode() []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], c.nr)
	binary.BigEndian.PutUint32(b[4:], c.arch)
	for i, a := range c.args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

// vm decodes the raw bytes of Program, so the serialization is checked too.
func vm(tb testing.TB) *bpf.VM {
	tb.Helper()
	prog, err := Program()
	if err != nil {
		tb.Fatal(err)
	}
	if len(prog)%8 != 0 || len(prog) == 0 {
		tb.Fatalf("program is %d bytes, want a non-empty multiple of 8", len(prog))
	}
	raw := make([]bpf.RawInstruction, len(prog)/8)
	for i := range raw {
		b := prog[8*i:]
		raw[i] = bpf.RawInstruction{Op: binary.LittleEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.LittleEndian.Uint32(b[4:])}
	}
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		tb.Fatal("program does not disassemble")
	}
	v, err := bpf.NewVM(ins)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func run(tb testing.TB, v *bpf.VM, c call) uint32 {
	tb.Helper()
	out, err := v.Run(c.encode())
	if err != nil {
		tb.Fatal(err)
	}
	return uint32(out)
}

// name renders a filter result for failure messages.
func name(r uint32) string {
	switch r {
	case retAllow:
		return "allow"
	case retKill:
		return "kill"
	case retEPERM:
		return "EPERM"
	case retENOSYS:
		return "ENOSYS"
	}
	return fmt.Sprintf("%#x", r)
}

func native(nr uint32, args ...uint64) call {
	c := call{arch: unix.AUDIT_ARCH_X86_64, nr: nr}
	copy(c.args[:], args)
	return c
}

func TestPolicy(t *testing.T) {
	v := vm(t)
	const goThread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_SYSVSEM | unix.CLONE_THREAD
	const pthread = goThread | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	for _, tc := range []struct {
		name string
		call call
		want uint32
	}{
		{"GetpidAllowed", native(unix.SYS_GETPID), retAllow},
		{"ReadAllowed", native(unix.SYS_READ, 0, 0, 10), retAllow},
		{"ExecveAllowed", native(unix.SYS_EXECVE), retAllow},
		{"SeccompAllowed", native(unix.SYS_SECCOMP), retAllow},
		{"MountEPERM", native(unix.SYS_MOUNT), retEPERM},
		{"UnshareEPERM", native(unix.SYS_UNSHARE, unix.CLONE_NEWUSER), retEPERM},
		{"SetnsEPERM", native(unix.SYS_SETNS), retEPERM},
		{"PtraceEPERM", native(unix.SYS_PTRACE), retEPERM},
		{"ForkCloneAllowed", native(unix.SYS_CLONE, uint64(unix.SIGCHLD)), retAllow},
		{"GoThreadCloneAllowed", native(unix.SYS_CLONE, goThread), retAllow},
		{"PthreadCloneAllowed", native(unix.SYS_CLONE, pthread), retAllow},
		{"VforkCloneAllowed", native(unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_VFORK|uint64(unix.SIGCHLD)), retAllow},
		{"CloneNewUserEPERM", native(unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), retEPERM},
		{"CloneNewNetEPERM", native(unix.SYS_CLONE, unix.CLONE_NEWNET), retEPERM},
		{"CloneNewTimeEPERM", native(unix.SYS_CLONE, unix.CLONE_NEWTIME|uint64(unix.SIGCHLD)), retEPERM},
		{"CloneHighWordIgnored", native(unix.SYS_CLONE, uint64(unix.CLONE_NEWUSER)<<32|uint64(unix.SIGCHLD)), retAllow},
		{"Clone3ENOSYS", native(unix.SYS_CLONE3), retENOSYS},
		{"PersonalityQueryAllowed", native(unix.SYS_PERSONALITY, 0xffffffff), retAllow},
		{"PersonalityLinuxAllowed", native(unix.SYS_PERSONALITY, 0), retAllow},
		{"PersonalityNoRandomizeEPERM", native(unix.SYS_PERSONALITY, 0x0040000), retEPERM}, // ADDR_NO_RANDOMIZE,
		{"SocketInetAllowed", native(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM), retAllow},
		{"SocketUnixAllowed", native(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM), retAllow},
		{"SocketVsockEPERM", native(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM), retEPERM},
		{"IoctlTCGETSAllowed", native(unix.SYS_IOCTL, 0, unix.TCGETS), retAllow},
		{"IoctlTIOCSTIEPERM", native(unix.SYS_IOCTL, 0, unix.TIOCSTI), retEPERM},
		{"I386Killed", call{arch: unix.AUDIT_ARCH_I386, nr: 20}, retKill},
		{"AArch64Killed", call{arch: unix.AUDIT_ARCH_AARCH64, nr: unix.SYS_GETPID}, retKill},
		{"X32Killed", native(x32Bit | unix.SYS_GETPID), retKill},
		{"X32MountKilled", native(x32Bit | unix.SYS_MOUNT), retKill},
		{"MinusOneENOSYS", native(0xffffffff), retENOSYS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := run(t, v, tc.call); got != tc.want {
				t.Fatalf("got %s, want %s", name(got), name(tc.want))
			}
		})
	}
}

// TestDeniedTable checks every syscall of the table is refused and that the
// table has no duplicate or argument-filtered entry.
func TestDeniedTable(t *testing.T) {
	v := vm(t)
	seen := map[uint32]string{}
	for _, r := range denied {
		if prev, dup := seen[r.nr]; dup {
			t.Errorf("%s and %s share number %d", prev, r.name, r.nr)
		}
		seen[r.nr] = r.name
		switch r.nr {
		case sysClone, sysClone3, sysPersonality, sysSocket, sysIoctl:
			t.Errorf("%s is argument-filtered and must not be in the table", r.name)
		}
		if got := run(t, v, native(r.nr)); got != retEPERM {
			t.Errorf("%s (%d): got %s, want EPERM", r.name, r.nr, name(got))
		}
	}
	for _, bit := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWTIME} {
		if got := run(t, v, native(unix.SYS_CLONE, bit|uint64(unix.SIGCHLD))); got != retEPERM {
			t.Errorf("clone(%#x): got %s, want EPERM", bit, name(got))
		}
	}
}

// TestAllowedSyscalls checks that every syscall outside the policy is let
// through, so ordinary programs keep working.
func TestAllowedSyscalls(t *testing.T) {
	v := vm(t)
	special := map[uint32]bool{sysClone: true, sysClone3: true, sysPersonality: true, sysSocket: true, sysIoctl: true}
	for _, r := range denied {
		special[r.nr] = true
	}
	for nr := uint32(0); nr < 470; nr++ {
		if special[nr] {
			continue
		}
		if got := run(t, v, native(nr)); got != retAllow {
			t.Errorf("syscall %d: got %s, want allow", nr, name(got))
		}
	}
}
