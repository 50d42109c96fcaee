//go:build unix && !linux

package main

import "syscall"

// childSysProcAttr puts a child in its own process group, so that Ctrl-C
// in a terminal reaches only tmdemo, which stops the children itself.
// Only Linux can also have a child signalled when tmdemo dies.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
