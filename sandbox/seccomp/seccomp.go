// Package seccomp builds the sandbox's seccomp filter: a classic BPF
// program, in the raw form `bwrap --seccomp FD` reads (an array of little-
// endian struct sock_filter).
//
// The policy allows by default and refuses what a sandbox never needs: the
// mount family, new namespaces (unshare, setns, clone with CLONE_NEW* flags;
// clone3 gets ENOSYS so libc falls back to clone, whose flags can be
// checked), ptrace and cross-process memory access, bpf, perf, io_uring and
// the AIO calls, userfaultfd, the keyring, kexec and modules, file handles, and changes to
// machine-wide state (clocks, swap, reboot, accounting, quotas). Sockets
// are limited to AF_UNIX, inet and NETLINK_ROUTE, and on a cgroup v1 host
// inet to TCP (sockets.go: buffers the sandbox's cgroup is not charged for
// are refused). Only the
// native ABI is allowed: on x86_64 an i386 or x32 syscall kills the process,
// on arm64 a 32-bit ARM one does.
//
// The policy is one list of refusals (policy.go) and one table of syscall
// numbers per architecture (table_x86_64.go, table_aarch64.go); Program
// picks the table of runtime.GOARCH. Every table builds on every GOARCH, so
// the tests check both in the BPF VM wherever they run.
//
// The filter is built directly with golang.org/x/net/bpf rather than
// elastic/go-seccomp-bpf, because with a default-allow policy that library
// lets syscalls of a foreign arch through (its arch check jumps to the
// default action).
package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/net/bpf"
)

// ErrUnsupported is returned by Program on a platform the policy does not
// cover (linux/amd64 and linux/arm64 are).
var ErrUnsupported = errors.New("seccomp: only linux/amd64 and linux/arm64 are supported")

// rule is one syscall of the policy table.
type rule struct {
	nr   uint32
	name string
}

// Return values of the filter (linux/seccomp.h; errno values of Linux).
const (
	retAllow  = 0x7fff0000    // SECCOMP_RET_ALLOW
	retKill   = 0x80000000    // SECCOMP_RET_KILL_PROCESS
	retErrno  = 0x00050000    // SECCOMP_RET_ERRNO, ORed with the errno
	retEPERM  = retErrno | 1  // EPERM
	retENOSYS = retErrno | 38 // ENOSYS
)

// Offsets into struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]}.
// Loads are native-endian (little): the low word of args[i] is at argLo(i).
const (
	offNr   = 0
	offArch = 4
)

func argLo(i uint32) uint32 { return 16 + 8*i }

// Program returns the filter for the running architecture and the host's
// options o as raw bytes for `bwrap --seccomp FD`. It fails with
// ErrUnsupported off linux/amd64 and linux/arm64, or if the program cannot
// be assembled.
func Program(o Options) ([]byte, error) {
	t := native()
	if t == nil {
		return nil, ErrUnsupported
	}
	return program(t, o)
}

// program returns the filter of table t with options o as raw bytes.
func program(t *table, o Options) ([]byte, error) {
	ins, err := instructions(t, o)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(ins)
	if err != nil {
		return nil, fmt.Errorf("assemble seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.LittleEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.LittleEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// maxInstructions is the kernel's BPF_MAXINSNS.
const maxInstructions = 4096

// instructions is the policy for table t and options o as BPF
// instructions.
func instructions(t *table, o Options) ([]bpf.Instruction, error) {
	for _, name := range argFiltered {
		if _, ok := t.nr[name]; !ok { // a zero would filter syscall 0 instead
			return nil, fmt.Errorf("seccomp filter for %s: no number for %s", t.goarch, name)
		}
	}
	ins := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: t.audit, SkipTrue: 1},
		bpf.RetConstant{Val: retKill},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		// syscall(-1) is what a tracer uses to skip a call: ENOSYS, as the
		// kernel would answer, rather than the x32 kill below.
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xffffffff, SkipFalse: 1},
		bpf.RetConstant{Val: retENOSYS},
	}
	if t.x32Bit != 0 {
		ins = append(ins,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: t.x32Bit, SkipFalse: 1},
			bpf.RetConstant{Val: retKill})
	}
	for _, r := range t.denied() {
		ins = append(ins, returnIf(r.nr, retEPERM)...)
	}
	ins = append(ins, returnIf(t.nr["clone3"], retENOSYS)...)
	ins = appendBlock(ins, t.nr["clone"], []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNamespaces, SkipFalse: 1},
		bpf.RetConstant{Val: retEPERM},
		bpf.RetConstant{Val: retAllow},
	})
	ins = appendBlock(ins, t.nr["personality"], argIn(0, personalities, retAllow, retEPERM))
	ins = appendBlock(ins, t.nr["socket"], socketBlock(o))
	ins = appendBlock(ins, t.nr["socketpair"], socketpairBlock())
	ins = appendBlock(ins, t.nr["ioctl"], argIn(1, t.deniedIoctls, retEPERM, retAllow))
	ins = appendBlock(ins, t.nr["prlimit64"], prlimitOthers())
	ins = append(ins, bpf.RetConstant{Val: retAllow})
	if len(ins) > maxInstructions {
		return nil, fmt.Errorf("seccomp filter: %d instructions, the kernel takes %d", len(ins), maxInstructions)
	}
	return ins, nil
}

// returnIf returns ret when the syscall number (in the accumulator) is nr.
func returnIf(nr, ret uint32) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1},
		bpf.RetConstant{Val: ret},
	}
}

// appendBlock appends a check that runs block when the syscall number is nr
// and skips it otherwise. block must end in a return on every path, as it
// overwrites the accumulator.
func appendBlock(ins []bpf.Instruction, nr uint32, block []bpf.Instruction) []bpf.Instruction {
	ins = append(ins, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: uint8(len(block))})
	return append(ins, block...)
}

// argIn returns match when the low word of argument arg is one of values,
// else other.
func argIn(arg uint32, values []uint32, match, other uint32) []bpf.Instruction {
	ins := []bpf.Instruction{bpf.LoadAbsolute{Off: argLo(arg), Size: 4}}
	for i, v := range values {
		ins = append(ins, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(len(values) - i)})
	}
	return append(ins, bpf.RetConstant{Val: other}, bpf.RetConstant{Val: match})
}
