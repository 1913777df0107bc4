package sandbox

import "golang.org/x/sys/unix"

// ExecIsolation says how the commands of one sandbox are kept from each
// other on this kernel: "landlock" when the kernel has Landlock ABI 2 or
// later (the init starts every command in a Landlock domain of its own, so
// no command can read or write another's memory, descriptors or
// environment through /proc), else "none" (any process of a sandbox can
// reach every other of the same sandbox, an earlier command's included).
// The init decides the same way, by asking the same kernel.
func ExecIsolation() string {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 || abi < 2 {
		return "none"
	}
	return "landlock"
}
