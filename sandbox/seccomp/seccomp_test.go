//go:build linux

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

// vm decodes the raw bytes of the program of table tab with options o, so
// the serialization is checked too.
func vm(tb testing.TB, tab *table, o Options) *bpf.VM {
	tb.Helper()
	prog, err := program(tab, o)
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

// forEachTable runs f as a subtest per architecture's table.
func forEachTable(t *testing.T, f func(t *testing.T, tab *table)) {
	for _, tab := range tables {
		t.Run(tab.goarch, func(t *testing.T) { f(t, tab) })
	}
}

// testNumbers are the numbers of the allowed syscalls the tests make, per
// GOARCH (checked against golang.org/x/sys/unix by TestTablesMatchXSys).
var testNumbers = map[string]map[string]uint32{
	"amd64": {"getpid": 39, "read": 0, "execve": 59, "seccomp": 317},
	"arm64": {"getpid": 172, "read": 63, "execve": 221, "seccomp": 277},
}

// sysnr returns the number of syscall name in tab (policy or test numbers).
func sysnr(tb testing.TB, tab *table, name string) uint32 {
	tb.Helper()
	if nr, ok := tab.nr[name]; ok {
		return nr
	}
	if nr, ok := testNumbers[tab.goarch][name]; ok {
		return nr
	}
	tb.Fatalf("%s: no number for %s", tab.goarch, name)
	return 0
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
	case retEAFNOSUPPORT:
		return "EAFNOSUPPORT"
	}
	return fmt.Sprintf("%#x", r)
}

// sys is a native call of tab's architecture to the syscall called name.
func sys(tb testing.TB, tab *table, name string, args ...uint64) call {
	tb.Helper()
	return nr(tab, sysnr(tb, tab, name), args...)
}

// nr is a native call of tab's architecture to syscall number n.
func nr(tab *table, n uint32, args ...uint64) call {
	c := call{arch: tab.audit, nr: n}
	copy(c.args[:], args)
	return c
}

// TestPolicy runs the same table of allowed and refused calls through the
// filter of every architecture; only the foreign-ABI cases differ.
func TestPolicy(t *testing.T) {
	const goThread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_SYSVSEM | unix.CLONE_THREAD
	const pthread = goThread | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	const tcgets, tiocsti = 0x5401, 0x5412 // the same on amd64 and arm64
	forEachTable(t, func(t *testing.T, tab *table) {
		v := vm(t, tab, Options{})
		cases := []struct {
			name string
			call call
			want uint32
		}{
			{"GetpidAllowed", sys(t, tab, "getpid"), retAllow},
			{"ReadAllowed", sys(t, tab, "read", 0, 0, 10), retAllow},
			{"ExecveAllowed", sys(t, tab, "execve"), retAllow},
			{"SeccompAllowed", sys(t, tab, "seccomp"), retAllow},
			{"MountEPERM", sys(t, tab, "mount"), retEPERM},
			{"UnshareEPERM", sys(t, tab, "unshare", unix.CLONE_NEWUSER), retEPERM},
			{"SetnsEPERM", sys(t, tab, "setns"), retEPERM},
			{"PtraceEPERM", sys(t, tab, "ptrace"), retEPERM},
			{"ForkCloneAllowed", sys(t, tab, "clone", uint64(unix.SIGCHLD)), retAllow},
			{"GoThreadCloneAllowed", sys(t, tab, "clone", goThread), retAllow},
			{"PthreadCloneAllowed", sys(t, tab, "clone", pthread), retAllow},
			{"VforkCloneAllowed", sys(t, tab, "clone", unix.CLONE_VM|unix.CLONE_VFORK|uint64(unix.SIGCHLD)), retAllow},
			{"CloneNewUserEPERM", sys(t, tab, "clone", unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), retEPERM},
			{"CloneNewNetEPERM", sys(t, tab, "clone", unix.CLONE_NEWNET), retEPERM},
			{"CloneNewTimeEPERM", sys(t, tab, "clone", unix.CLONE_NEWTIME|uint64(unix.SIGCHLD)), retEPERM},
			{"CloneHighWordIgnored", sys(t, tab, "clone", uint64(unix.CLONE_NEWUSER)<<32|uint64(unix.SIGCHLD)), retAllow},
			{"Clone3ENOSYS", sys(t, tab, "clone3"), retENOSYS},
			{"PersonalityQueryAllowed", sys(t, tab, "personality", 0xffffffff), retAllow},
			{"PersonalityLinuxAllowed", sys(t, tab, "personality", 0), retAllow},
			{"PersonalityNoRandomizeEPERM", sys(t, tab, "personality", 0x0040000), retEPERM}, // ADDR_NO_RANDOMIZE
			{"SocketInetAllowed", sys(t, tab, "socket", unix.AF_INET, unix.SOCK_STREAM), retAllow},
			{"SocketUnixAllowed", sys(t, tab, "socket", unix.AF_UNIX, unix.SOCK_STREAM), retAllow},
			{"SocketVsockRefused", sys(t, tab, "socket", unix.AF_VSOCK, unix.SOCK_STREAM), retEAFNOSUPPORT},
			{"IoSetupEPERM", sys(t, tab, "io_setup", 1024, 0), retEPERM},
			{"IoctlTCGETSAllowed", sys(t, tab, "ioctl", 0, tcgets), retAllow},
			{"IoctlTIOCSTIEPERM", sys(t, tab, "ioctl", 0, tiocsti), retEPERM},
			{"MinusOneENOSYS", nr(tab, 0xffffffff), retENOSYS},
		}
		switch tab.goarch {
		case "amd64":
			cases = append(cases, []struct {
				name string
				call call
				want uint32
			}{
				{"I386Killed", call{arch: unix.AUDIT_ARCH_I386, nr: 20}, retKill},
				{"AArch64Killed", call{arch: unix.AUDIT_ARCH_AARCH64, nr: 172}, retKill},
				{"X32Killed", nr(tab, x86_64.x32Bit|sysnr(t, tab, "getpid")), retKill},
				{"X32MountKilled", nr(tab, x86_64.x32Bit|sysnr(t, tab, "mount")), retKill},
			}...)
		case "arm64":
			cases = append(cases, []struct {
				name string
				call call
				want uint32
			}{
				{"ARM32Killed", call{arch: unix.AUDIT_ARCH_ARM, nr: 20}, retKill},
				{"ARM32MountKilled", call{arch: unix.AUDIT_ARCH_ARM, nr: 21}, retKill},
				{"X86_64Killed", call{arch: unix.AUDIT_ARCH_X86_64, nr: 39}, retKill},
			}...)
		default:
			t.Fatalf("no foreign-ABI cases for %s", tab.goarch)
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if got := run(t, v, tc.call); got != tc.want {
					t.Fatalf("got %s, want %s", name(got), name(tc.want))
				}
			})
		}
	})
}

// TestDeniedTable checks, per architecture, that every syscall of the
// table is refused and that the table has no duplicate or
// argument-filtered entry, and that every refusal of the policy is
// numbered or declared absent.
func TestDeniedTable(t *testing.T) {
	forEachTable(t, func(t *testing.T, tab *table) {
		v := vm(t, tab, Options{})
		absent := map[string]bool{}
		for _, n := range tab.absent {
			absent[n] = true
		}
		for _, n := range deniedSyscalls {
			if _, ok := tab.nr[n]; ok == absent[n] {
				t.Errorf("%s: numbered %v, declared absent %v: want exactly one", n, ok, absent[n])
			}
		}
		special := map[uint32]string{}
		for _, n := range argFiltered {
			nr, ok := tab.nr[n]
			if !ok {
				t.Fatalf("argument-filtered %s has no number", n)
			}
			special[nr] = n
		}
		seen := map[uint32]string{}
		for _, r := range tab.denied() {
			if prev, dup := seen[r.nr]; dup {
				t.Errorf("%s and %s share number %d", prev, r.name, r.nr)
			}
			seen[r.nr] = r.name
			if n, ok := special[r.nr]; ok {
				t.Errorf("%s has the number of %s, which is argument-filtered", r.name, n)
			}
			if got := run(t, v, nr(tab, r.nr)); got != retEPERM {
				t.Errorf("%s (%d): got %s, want EPERM", r.name, r.nr, name(got))
			}
		}
		if len(tab.nr) != len(seen)+len(argFiltered) {
			t.Errorf("%d numbers, want %d refused + %d argument-filtered", len(tab.nr), len(seen), len(argFiltered))
		}
		for _, bit := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
			unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWTIME} {
			if got := run(t, v, sys(t, tab, "clone", bit|uint64(unix.SIGCHLD))); got != retEPERM {
				t.Errorf("clone(%#x): got %s, want EPERM", bit, name(got))
			}
		}
	})
}

// TestSocketPolicy checks the socket rules per architecture, with and
// without Options.TCPOnlyInet (a cgroup v1 host's filter).
func TestSocketPolicy(t *testing.T) {
	const (
		nonblockCloexec = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
		mptcp, sctp     = 262, unix.IPPROTO_SCTP
		usersock        = 2 // NETLINK_USERSOCK
	)
	type verdicts struct{ v2, v1 uint32 } // without and with TCPOnlyInet
	both := func(r uint32) verdicts { return verdicts{r, r} }
	forEachTable(t, func(t *testing.T, tab *table) {
		v2, v1 := vm(t, tab, Options{}), vm(t, tab, Options{TCPOnlyInet: true})
		cases := []struct {
			name string
			call call
			want verdicts
		}{
			{"UnixStream", sys(t, tab, "socket", unix.AF_UNIX, unix.SOCK_STREAM), both(retAllow)},
			{"UnixDgram", sys(t, tab, "socket", unix.AF_UNIX, unix.SOCK_DGRAM|nonblockCloexec), both(retAllow)},
			{"InetTCP", sys(t, tab, "socket", unix.AF_INET, unix.SOCK_STREAM, 0), both(retAllow)},
			{"InetTCPFlags", sys(t, tab, "socket", unix.AF_INET, unix.SOCK_STREAM|nonblockCloexec, unix.IPPROTO_TCP), both(retAllow)},
			{"Inet6TCP", sys(t, tab, "socket", unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0), both(retAllow)},
			{"InetUDP", sys(t, tab, "socket", unix.AF_INET, unix.SOCK_DGRAM, 0), verdicts{retAllow, retEPERM}},
			{"InetUDPFlags", sys(t, tab, "socket", unix.AF_INET, unix.SOCK_DGRAM|nonblockCloexec, unix.IPPROTO_UDP), verdicts{retAllow, retEPERM}},
			{"Inet6UDP", sys(t, tab, "socket", unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0), verdicts{retAllow, retEPERM}},
			{"InetPing", sys(t, tab, "socket", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP), verdicts{retAllow, retEPERM}},
			{"InetRaw", sys(t, tab, "socket", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), verdicts{retAllow, retEPERM}},
			{"InetSCTP", sys(t, tab, "socket", unix.AF_INET, unix.SOCK_STREAM, sctp), verdicts{retAllow, retEPERM}},
			{"Inet6MPTCP", sys(t, tab, "socket", unix.AF_INET6, unix.SOCK_STREAM, mptcp), verdicts{retAllow, retEPERM}},
			{"InetHighWordIgnored", sys(t, tab, "socket", unix.AF_INET|1<<32, unix.SOCK_STREAM), both(retAllow)},
			{"NetlinkRoute", sys(t, tab, "socket", unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE), both(retAllow)},
			{"NetlinkRouteDgram", sys(t, tab, "socket", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_ROUTE), both(retAllow)},
			{"NetlinkUsersock", sys(t, tab, "socket", unix.AF_NETLINK, unix.SOCK_RAW, usersock), both(retEAFNOSUPPORT)},
			{"NetlinkSockDiag", sys(t, tab, "socket", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG), both(retEAFNOSUPPORT)},
			{"NetlinkAudit", sys(t, tab, "socket", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT), both(retEAFNOSUPPORT)},
			{"NetlinkUevent", sys(t, tab, "socket", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_KOBJECT_UEVENT), both(retEAFNOSUPPORT)},
			{"Packet", sys(t, tab, "socket", unix.AF_PACKET, unix.SOCK_RAW), both(retEAFNOSUPPORT)},
			{"Vsock", sys(t, tab, "socket", unix.AF_VSOCK, unix.SOCK_STREAM), both(retEAFNOSUPPORT)},
			{"Alg", sys(t, tab, "socket", unix.AF_ALG, unix.SOCK_SEQPACKET), both(retEAFNOSUPPORT)},
			{"Key", sys(t, tab, "socket", unix.AF_KEY, unix.SOCK_RAW), both(retEAFNOSUPPORT)},
			{"Unspec", sys(t, tab, "socket", unix.AF_UNSPEC, unix.SOCK_STREAM), both(retEAFNOSUPPORT)},
			{"SocketpairUnix", sys(t, tab, "socketpair", unix.AF_UNIX, unix.SOCK_STREAM), both(retAllow)},
			{"SocketpairUnixDgram", sys(t, tab, "socketpair", unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC), both(retAllow)},
			{"SocketpairNetlink", sys(t, tab, "socketpair", unix.AF_NETLINK, unix.SOCK_RAW, usersock), both(retEAFNOSUPPORT)},
			{"SocketpairInet", sys(t, tab, "socketpair", unix.AF_INET, unix.SOCK_DGRAM), both(retEAFNOSUPPORT)},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got := verdicts{run(t, v2, tc.call), run(t, v1, tc.call)}
				if got != tc.want {
					t.Fatalf("got %s (v2), %s (v1); want %s, %s", name(got.v2), name(got.v1), name(tc.want.v2), name(tc.want.v1))
				}
			})
		}
	})
}

// TestAllowedSyscalls checks, per architecture, that every syscall outside
// the policy is let through, so ordinary programs keep working.
func TestAllowedSyscalls(t *testing.T) {
	forEachTable(t, func(t *testing.T, tab *table) {
		v := vm(t, tab, Options{})
		special := map[uint32]bool{}
		for _, nr := range tab.nr {
			special[nr] = true
		}
		for n := uint32(0); n < 470; n++ {
			if special[n] {
				continue
			}
			if got := run(t, v, nr(tab, n)); got != retAllow {
				t.Errorf("syscall %d: got %s, want allow", n, name(got))
			}
		}
	})
}
