package inside

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// A terminal's size when the request gives none.
const (
	defaultRows = 24
	defaultCols = 80
)

// newTerminalStreams gives cmd a pseudo-terminal of the sandbox's own
// devpts instance (/dev/ptmx is its pts/ptmx; the host's ptys are not in
// the sandbox): the terminal is the command's stdin, stdout and stderr and
// its controlling terminal, of size (24×80 when zero). The init keeps the
// master: what the command writes is one stream (stdout), what the client
// sends is typed in.
func newTerminalStreams(cmd *exec.Cmd, size control.Resize) (*commandStreams, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open a terminal: %w", err)
	}
	fail := func(err error) (*commandStreams, error) {
		master.Close()
		return nil, fmt.Errorf("open a terminal: %w", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		return fail(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		return fail(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	if size.Rows == 0 || size.Cols == 0 {
		size = control.Resize{Rows: defaultRows, Cols: defaultCols}
	}
	if err := setWinsize(master, size); err != nil {
		slave.Close()
		return fail(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, 0
	return &commandStreams{
		stdin:   master,
		outputs: []output{{master, control.FrameStdout}},
		pty:     master,
		child:   []*os.File{slave},
		own:     []*os.File{master},
	}, nil
}

// setWinsize sets the size of the terminal whose master is f (its process
// gets SIGWINCH).
func setWinsize(f *os.File, size control.Resize) error {
	if size.Rows == 0 || size.Cols == 0 {
		return fmt.Errorf("terminal size %dx%d: both must be positive", size.Rows, size.Cols)
	}
	return unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
}
