package seccomp

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// deniedSyscalls are the syscalls refused with EPERM, whatever their
// arguments, by name; each architecture's table gives their numbers (or
// says the architecture has no such call). A sandbox has every namespace
// and no capability, so most would fail anyway; refusing them here removes
// the kernel attack surface behind them. The order is the filter's.
var deniedSyscalls = []string{
	// Mounts and the new mount API: the filesystem view is fixed by bwrap.
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// New namespaces (clone is filtered by its flags, see cloneNamespaces).
	"unshare", "setns",
	// Looking into or controlling other processes.
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
	// Kernel programming and tracing interfaces.
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "fanotify_init", "lookup_dcookie",
	// The kernel keyring is not namespaced.
	"keyctl", "add_key", "request_key",
	// Replacing or extending the kernel.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	// File handles bypass the mount view (the "shocker" escape).
	"open_by_handle_at", "name_to_handle_at",
	// Machine-wide state: power, swap, clocks, accounting, quotas, logs.
	"reboot", "swapon", "swapoff", "settimeofday", "clock_settime", "clock_adjtime",
	"adjtimex", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup",
	"sethostname", "setdomainname",
	// Raw hardware access and obsolete interfaces (all but nfsservctl x86-only).
	"iopl", "ioperm", "modify_ldt", "nfsservctl", "uselib", "ustat", "sysfs",
	// Linux AIO, as io_uring: its contexts come from the host-wide
	// fs.aio-max-nr, which one sandbox could fill for every process.
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
}

// argFiltered are the syscalls whose arguments decide; every table numbers
// them.
var argFiltered = []string{"clone", "clone3", "personality", "socket", "socketpair", "ioctl", "prlimit64"}

// cloneNamespaces are the clone flags that make a new namespace; clone with
// any of them is refused. Every one is in the low 32 bits, which is all the
// kernel reads of clone's flags. clone's flags are its first argument on
// every architecture here.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWTIME

// personalities are the personality(2) values allowed (as Docker's default
// profile does): the Linux default, PER_LINUX32, UNAME26 variants, and the
// 0xffffffff query. Anything else (e.g. ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC)
// is refused.
var personalities = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// table is one architecture's numbers for the policy. Its values are
// written out (from golang.org/x/sys/unix for that GOARCH, which a test
// checks), not taken from the unix package, so that every table builds and
// is tested on any GOARCH.
type table struct {
	goarch string // the runtime.GOARCH it serves
	audit  uint32 // the AUDIT_ARCH_* value allowed; any other arch is killed
	// x32Bit marks syscall numbers of a second ABI that shares the audit
	// arch (x86_64's x32); such calls are killed. 0: there is none.
	x32Bit uint32
	nr     map[string]uint32 // by name: deniedSyscalls (but absent) and argFiltered
	absent []string          // deniedSyscalls this architecture does not have
	// deniedIoctls are ioctl requests refused on any fd: TIOCSTI and
	// TIOCLINUX push input into a terminal the sandbox may share with its
	// caller.
	deniedIoctls []uint32
}

// tables are the architectures the policy covers.
var tables = []*table{&x86_64, &aarch64}

// tableFor returns the table for goos/goarch, or nil.
func tableFor(goos, goarch string) *table {
	if goos != "linux" {
		return nil
	}
	for _, t := range tables {
		if t.goarch == goarch {
			return t
		}
	}
	return nil
}

// native returns the table of the running program's architecture, or nil.
func native() *table { return tableFor(runtime.GOOS, runtime.GOARCH) }

// denied returns t's refused syscalls, in deniedSyscalls' order.
func (t *table) denied() []rule {
	var out []rule
	for _, name := range deniedSyscalls {
		if nr, ok := t.nr[name]; ok {
			out = append(out, rule{nr, name})
		}
	}
	return out
}
