package seccomp

// aarch64 is the policy's table for linux/arm64 (numbers from
// golang.org/x/sys/unix's zsysnum_linux_arm64.go, the generic syscall
// table). Only the native AArch64 ABI is allowed: 32-bit ARM (compat) calls
// have another audit arch and kill the process; arm64 has no second ABI
// under its own audit arch, so there is no x32-style check. The x86-only
// calls (iopl, ioperm, modify_ldt, uselib, ustat, sysfs) do not exist here.
var aarch64 = table{
	goarch: "arm64",
	audit:  0xc00000b7, // AUDIT_ARCH_AARCH64
	nr: map[string]uint32{
		"mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
		"move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431,
		"fsmount": 432, "fspick": 433, "mount_setattr": 442,
		"unshare": 97, "setns": 268,
		"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
		"process_madvise": 440, "pidfd_getfd": 438, "kcmp": 272,
		"bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425,
		"io_uring_enter": 426, "io_uring_register": 427, "fanotify_init": 262, "lookup_dcookie": 18,
		"keyctl": 219, "add_key": 217, "request_key": 218,
		"kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
		"delete_module":     106,
		"open_by_handle_at": 265, "name_to_handle_at": 264,
		"reboot": 142, "swapon": 224, "swapoff": 225, "settimeofday": 170, "clock_settime": 112,
		"clock_adjtime": 266, "adjtimex": 171, "acct": 89, "quotactl": 60, "quotactl_fd": 443,
		"syslog": 116, "vhangup": 58, "sethostname": 161, "setdomainname": 162,
		"nfsservctl": 42,
		"io_setup":   0, "io_destroy": 1, "io_submit": 2, "io_cancel": 3, "io_getevents": 4,
		"io_pgetevents": 292,
		"clone":         220, "clone3": 435, "personality": 92, "socket": 198, "socketpair": 199, "ioctl": 29,
		"prlimit64": 261, // see prlimit.go
	},
	absent:       []string{"iopl", "ioperm", "modify_ldt", "uselib", "ustat", "sysfs"},
	deniedIoctls: []uint32{0x5412, 0x541c}, // TIOCSTI, TIOCLINUX
}
