//go:build unix

package partialdir

import (
	"errors"
	"os"
	"syscall"
)

// Lock takes an exclusive flock(2) on directory dir without waiting. ok
// is false when another process holds it. The lock dies with the process
// (or when release closes the descriptor).
func Lock(dir string) (release func(), ok bool, err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() { f.Close() }, true, nil
}
