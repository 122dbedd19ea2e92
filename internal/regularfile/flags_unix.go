//go:build unix

package regularfile

import "syscall"

func extraFlags(follow Follow) int {
	if follow {
		return syscall.O_NONBLOCK
	}
	return syscall.O_NONBLOCK | syscall.O_NOFOLLOW
}
