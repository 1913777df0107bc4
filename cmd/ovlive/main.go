// Command ovlive is a stub until its issue lands.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "usage: ovlive COMMAND (not built yet)")
	os.Exit(2)
}
