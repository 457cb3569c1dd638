// Command pause is the process every Pod sandbox runs: it holds the Pod's
// namespaces open and does nothing else until it is told to stop. The lab
// builds its own because nothing can be pulled from outside this machine.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			// As PID 1 of a Pod that shares its process namespace, it inherits
			// orphans; reaping them keeps zombies from piling up.
			reap()
			continue
		}
		os.Exit(0)
	}
}

func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
