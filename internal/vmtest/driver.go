package vmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// validName is what a Command's Name may be.
var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// writeDriver writes dir/vmtest/driver.sh, the script the guest runs: it
// copies the share's bin/ to GuestBin, then runs each command under timeout(1) and leaves, per command i,
// dir/vmtest/i.out (stdout and stderr), i.code (the exit code) and i.ms
// (the wall time in milliseconds). Results of an earlier run are removed.
func writeDriver(dir string, cmds []Command) error {
	vm := filepath.Join(dir, "vmtest")
	if err := os.RemoveAll(vm); err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	if err := os.MkdirAll(vm, 0o755); err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	script, err := driverScript(cmds)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vm, "driver.sh"), []byte(script), 0o644); err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	return nil
}

// driverScript is the text of driver.sh for cmds.
func driverScript(cmds []Command) (string, error) {
	var b strings.Builder
	b.WriteString(`# Written by internal/vmtest: runs the commands of one boot in order.
set -u
out=` + GuestShare + `/vmtest
mkdir -p ` + GuestBin + `
chmod 0755 ` + filepath.Dir(GuestBin) + ` ` + GuestBin + `
if [ -d ` + GuestShare + `/bin ]; then cp -a ` + GuestShare + `/bin/. ` + GuestBin + `/ || exit 1; fi
cd ` + GuestBin + `
export PATH=` + GuestBin + `:$PATH VMTEST_BIN=` + GuestBin + `
# step I NAME SECONDS ENV... -- ARGV...: one command, its results in $out/I.*
step() {
	local i=$1 name=$2 secs=$3 start code
	shift 3
	local env=()
	while [ "$1" != -- ]; do env+=("$1"); shift; done
	shift
	echo "vmtest: $name: starting" >/dev/console
	start=$(date +%s%N)
	env "${env[@]}" timeout -s QUIT -k 30 "$secs" "$@" >"$out/$i.out" 2>&1 </dev/null
	code=$?
	echo $((($(date +%s%N) - start) / 1000000)) >"$out/$i.ms"
	echo "$code" >"$out/$i.code"
	echo "vmtest: $name: exit $code" >/dev/console
}
`)
	names := map[string]bool{}
	for i, c := range cmds {
		if !validName.MatchString(c.Name) || names[c.Name] {
			return "", fmt.Errorf("vmtest: command name %q: want unique [A-Za-z0-9._-]+", c.Name)
		}
		names[c.Name] = true
		if len(c.Argv) == 0 {
			return "", fmt.Errorf("vmtest: command %s has no argv", c.Name)
		}
		words := []string{"step", fmt.Sprint(i), c.Name, fmt.Sprint(int(commandTimeout(c).Seconds()))}
		for _, e := range c.Env {
			if !strings.Contains(e, "=") {
				return "", fmt.Errorf("vmtest: command %s: env %q is not KEY=VALUE", c.Name, e)
			}
			words = append(words, quote(e))
		}
		words = append(words, "--")
		for _, a := range c.Argv {
			words = append(words, quote(a))
		}
		b.WriteString(strings.Join(words, " ") + "\n")
	}
	b.WriteString("sync\n")
	return b.String(), nil
}

// quote makes s one word for bash, in single quotes.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
