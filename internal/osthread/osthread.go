// Package osthread runs code that changes the calling OS thread's kernel
// state (its cgroup, its namespaces) on a thread of its own, and keeps a
// thread that code could not restore out of use for good.
package osthread

import "runtime"

// Run runs f on an OS thread locked to it and returns f's error. When f
// reports the thread clean (back in the state it found it in), the thread
// goes back to the program's threads. Otherwise the thread is parked for
// good: never reused, since its state is not the program's, and never ended,
// since it may be the thread that started a bubblewrap, whose parent-death
// signal its end would fire (Linux ties that signal to the parent thread).
func Run(f func() (clean bool, err error)) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		clean, err := f()
		done <- err
		if !clean {
			select {}
		}
		runtime.UnlockOSThread()
	}()
	return <-done
}
