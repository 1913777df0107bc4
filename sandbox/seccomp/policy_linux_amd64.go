package seccomp

import "golang.org/x/sys/unix"

// nativeArch is the only audit arch whose syscalls are let through.
const nativeArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks syscall numbers of the x32 ABI, which shares the x86_64 audit
// arch; such calls are killed so they cannot bypass the table below.
const x32Bit = 0x40000000

// denied are the syscalls refused with EPERM, whatever their arguments. A
// sandbox has every namespace and no capability, so most would fail anyway;
// refusing them here removes the kernel attack surface behind them.
var denied = []rule{
	// Mounts and the new mount API: the filesystem view is fixed by bwrap.
	{unix.SYS_MOUNT, "mount"},
	{unix.SYS_UMOUNT2, "umount2"},
	{unix.SYS_PIVOT_ROOT, "pivot_root"},
	{unix.SYS_CHROOT, "chroot"},
	{unix.SYS_MOVE_MOUNT, "move_mount"},
	{unix.SYS_OPEN_TREE, "open_tree"},
	{unix.SYS_FSOPEN, "fsopen"},
	{unix.SYS_FSCONFIG, "fsconfig"},
	{unix.SYS_FSMOUNT, "fsmount"},
	{unix.SYS_FSPICK, "fspick"},
	{unix.SYS_MOUNT_SETATTR, "mount_setattr"},
	// New namespaces (clone is filtered by its flags, see cloneNamespaces).
	{unix.SYS_UNSHARE, "unshare"},
	{unix.SYS_SETNS, "setns"},
	// Looking into or controlling other processes.
	{unix.SYS_PTRACE, "ptrace"},
	{unix.SYS_PROCESS_VM_READV, "process_vm_readv"},
	{unix.SYS_PROCESS_VM_WRITEV, "process_vm_writev"},
	{unix.SYS_PROCESS_MADVISE, "process_madvise"},
	{unix.SYS_PIDFD_GETFD, "pidfd_getfd"},
	{unix.SYS_KCMP, "kcmp"},
	// Kernel programming and tracing interfaces.
	{unix.SYS_BPF, "bpf"},
	{unix.SYS_PERF_EVENT_OPEN, "perf_event_open"},
	{unix.SYS_USERFAULTFD, "userfaultfd"},
	{unix.SYS_IO_URING_SETUP, "io_uring_setup"},
	{unix.SYS_IO_URING_ENTER, "io_uring_enter"},
	{unix.SYS_IO_URING_REGISTER, "io_uring_register"},
	{unix.SYS_FANOTIFY_INIT, "fanotify_init"},
	{unix.SYS_LOOKUP_DCOOKIE, "lookup_dcookie"},
	// The kernel keyring is not namespaced.
	{unix.SYS_KEYCTL, "keyctl"},
	{unix.SYS_ADD_KEY, "add_key"},
	{unix.SYS_REQUEST_KEY, "request_key"},
	// Replacing or extending the kernel.
	{unix.SYS_KEXEC_LOAD, "kexec_load"},
	{unix.SYS_KEXEC_FILE_LOAD, "kexec_file_load"},
	{unix.SYS_INIT_MODULE, "init_module"},
	{unix.SYS_FINIT_MODULE, "finit_module"},
	{unix.SYS_DELETE_MODULE, "delete_module"},
	// File handles bypass the mount view (the "shocker" escape).
	{unix.SYS_OPEN_BY_HANDLE_AT, "open_by_handle_at"},
	{unix.SYS_NAME_TO_HANDLE_AT, "name_to_handle_at"},
	// Machine-wide state: power, swap, clocks, accounting, quotas, logs.
	{unix.SYS_REBOOT, "reboot"},
	{unix.SYS_SWAPON, "swapon"},
	{unix.SYS_SWAPOFF, "swapoff"},
	{unix.SYS_SETTIMEOFDAY, "settimeofday"},
	{unix.SYS_CLOCK_SETTIME, "clock_settime"},
	{unix.SYS_CLOCK_ADJTIME, "clock_adjtime"},
	{unix.SYS_ADJTIMEX, "adjtimex"},
	{unix.SYS_ACCT, "acct"},
	{unix.SYS_QUOTACTL, "quotactl"},
	{unix.SYS_QUOTACTL_FD, "quotactl_fd"},
	{unix.SYS_SYSLOG, "syslog"},
	{unix.SYS_VHANGUP, "vhangup"},
	{unix.SYS_SETHOSTNAME, "sethostname"},
	{unix.SYS_SETDOMAINNAME, "setdomainname"},
	// Raw hardware access and obsolete interfaces.
	{unix.SYS_IOPL, "iopl"},
	{unix.SYS_IOPERM, "ioperm"},
	{unix.SYS_MODIFY_LDT, "modify_ldt"},
	{unix.SYS_NFSSERVCTL, "nfsservctl"},
	{unix.SYS_USELIB, "uselib"},
	{unix.SYS_USTAT, "ustat"},
	{unix.SYS_SYSFS, "sysfs"},
}

// Syscalls whose arguments decide.
const (
	sysClone       = unix.SYS_CLONE
	sysClone3      = unix.SYS_CLONE3
	sysPersonality = unix.SYS_PERSONALITY
	sysSocket      = unix.SYS_SOCKET
	sysIoctl       = unix.SYS_IOCTL
)

// cloneNamespaces are the clone flags that make a new namespace; clone with
// any of them is refused. Every one is in the low 32 bits, which is all the
// kernel reads of clone's flags.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWTIME

// personalities are the personality(2) values allowed (as Docker's default
// profile does): the Linux default, PER_LINUX32, UNAME26 variants, and the
// 0xffffffff query. Anything else (e.g. ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC)
// is refused.
var personalities = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// deniedSocketFamilies are address families that reach past the network
// namespace: vsock talks to the hypervisor host whatever the namespace.
var deniedSocketFamilies = []uint32{unix.AF_VSOCK}

// deniedIoctls are ioctl requests refused on any fd: TIOCSTI and TIOCLINUX
// push input into a terminal the sandbox may share with its caller.
var deniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}
