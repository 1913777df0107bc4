//go:build !(linux && amd64)

package seccomp

// The policy covers linux/amd64 only; elsewhere Program returns
// ErrUnsupported.
const (
	nativeArch      = 0
	x32Bit          = 0
	sysClone        = 0
	sysClone3       = 0
	sysPersonality  = 0
	sysSocket       = 0
	sysIoctl        = 0
	cloneNamespaces = 0
)

var (
	denied               []rule
	personalities        []uint32
	deniedSocketFamilies []uint32
	deniedIoctls         []uint32
)
