package main

import "syscall"

// childSysProcAttr puts a child in its own process group and has the
// kernel send it SIGTERM should tmdemo die without stopping it (even by
// SIGKILL), so that no process of the demo outlives it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
