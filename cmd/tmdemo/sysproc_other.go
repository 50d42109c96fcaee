//go:build !unix

package main

import "syscall"

// childSysProcAttr has nothing to set on this system.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
