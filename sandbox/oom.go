package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// SandboxOOMScoreAdj is the oom_score_adj of every sandbox process: the
// highest, so that when the host runs out of memory the kernel kills a
// sandbox's process before the worker or anything else of the host's.
const SandboxOOMScoreAdj = 1000

// setOOMScoreAdj writes SandboxOOMScoreAdj to the oom_score_adj of each of
// pids (a starting sandbox's bubblewrap and init, before anything of the
// sandbox's runs: its processes inherit it). The runtime writes it as root
// (CAP_SYS_RESOURCE), which also makes it their oom_score_adj_min: no
// process of the sandbox can lower it again. Errors: syscall.ESRCH when a
// process is gone, else what the write says.
func setOOMScoreAdj(pids ...int) error {
	for _, pid := range pids {
		p := "/proc/" + strconv.Itoa(pid) + "/oom_score_adj"
		if err := os.WriteFile(p, []byte(strconv.Itoa(SandboxOOMScoreAdj)), 0); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				err = syscall.ESRCH
			}
			return fmt.Errorf("set oom_score_adj of %d: %w", pid, err)
		}
	}
	return nil
}
