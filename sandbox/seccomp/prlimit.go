package seccomp

import "golang.org/x/net/bpf"

// prlimitOthers is the check of prlimit64(pid, resource, new, old): setting
// a limit of another process (pid not 0, new not NULL) is refused with
// EPERM; a process's own limits (pid 0, as libc's setrlimit and Go's
// syscall.Setrlimit call it) and reading another's stay allowed. Without it
// a process of the sandbox could lower the init's descriptor limit
// (`prlimit --pid 1 --nofile=6:6`), which the kernel allows between
// processes of one uid, and stall every later request (issue 28, finding
// 9). pid is a pid_t, of which the kernel reads the low word; new is a
// pointer, both of whose words are checked.
func prlimitOthers() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 5},
		bpf.LoadAbsolute{Off: argLo(2), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 2},
		bpf.LoadAbsolute{Off: argLo(2) + 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 1},
		bpf.RetConstant{Val: retEPERM},
		bpf.RetConstant{Val: retAllow},
	}
}
