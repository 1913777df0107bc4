package hostprep

import (
	"fmt"
	"os/exec"
	"syscall"
)

// sandboxNamespaces are the namespaces bubblewrap makes for every sandbox.
const sandboxNamespaces = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP

// Namespaces starts bin --version (bubblewrap's) in new namespaces of every
// kind a sandbox has and waits for it: it fails, with the kernel's error,
// where a seccomp filter, an AppArmor profile, a sysctl or a missing
// capability refuses them (hostcheck's NamespaceRefusal says which), so
// that the worker can say so before any sandbox fails to start.
func Namespaces(bin string) error {
	cmd := exec.Command(bin, "--version")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: sandboxNamespaces, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("create the namespaces of a sandbox: %w", err)
	}
	return nil
}
