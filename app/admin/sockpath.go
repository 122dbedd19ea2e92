package admin

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxSockPath is the longest path a Unix socket address (sockaddr_un,
// 108 bytes with the terminating NUL on Linux) holds.
const maxSockPath = 107

// sockAddr returns an address that reaches the socket at path: path
// itself when it fits a socket address; for a deeper one,
// /proc/self/fd/N/NAME, through descriptor N of path's directory (the
// kernel resolves it like the full path). done closes that descriptor:
// call it once the address is no longer used (after connect; after the
// listener, which removes the socket by that address, is closed).
func sockAddr(path string) (addr string, done func(), err error) {
	if len(path) <= maxSockPath {
		return path, func() {}, nil
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("admin: the socket path is %d bytes, more than a socket address holds (%d), and its directory cannot be opened: %w", len(path), maxSockPath, err)
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path)), func() { unix.Close(fd) }, nil
}
