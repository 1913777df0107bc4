package seccomp

// x86_64 is the policy's table for linux/amd64 (numbers from
// golang.org/x/sys/unix's zsysnum_linux_amd64.go). Only the native x86_64
// ABI is allowed: i386 calls (another audit arch) and x32 calls (the same
// audit arch, numbers with bit 30 set) kill the process.
var x86_64 = table{
	goarch: "amd64",
	audit:  0xc000003e, // AUDIT_ARCH_X86_64
	x32Bit: 0x40000000,
	nr: map[string]uint32{
		"mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
		"move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431,
		"fsmount": 432, "fspick": 433, "mount_setattr": 442,
		"unshare": 272, "setns": 308,
		"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
		"process_madvise": 440, "pidfd_getfd": 438, "kcmp": 312,
		"bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
		"io_uring_enter": 426, "io_uring_register": 427, "fanotify_init": 300, "lookup_dcookie": 212,
		"keyctl": 250, "add_key": 248, "request_key": 249,
		"kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
		"delete_module":     176,
		"open_by_handle_at": 304, "name_to_handle_at": 303,
		"reboot": 169, "swapon": 167, "swapoff": 168, "settimeofday": 164, "clock_settime": 227,
		"clock_adjtime": 305, "adjtimex": 159, "acct": 163, "quotactl": 179, "quotactl_fd": 443,
		"syslog": 103, "vhangup": 153, "sethostname": 170, "setdomainname": 171,
		"iopl": 172, "ioperm": 173, "modify_ldt": 154, "nfsservctl": 180, "uselib": 134,
		"ustat": 136, "sysfs": 139,
		"io_setup": 206, "io_destroy": 207, "io_submit": 209, "io_cancel": 210, "io_getevents": 208,
		"io_pgetevents": 333,
		"clone":         56, "clone3": 435, "personality": 135, "socket": 41, "socketpair": 53, "ioctl": 16,
		"prlimit64": 302, // see prlimit.go
	},
	deniedIoctls: []uint32{0x5412, 0x541c}, // TIOCSTI, TIOCLINUX
}
