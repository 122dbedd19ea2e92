package admin

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"golang.org/x/sys/unix"
)

// Cred is a peer's credentials as the kernel reports them.
type Cred struct {
	PID      int32
	UID, GID uint32
}

// Allowed decides whether a peer may use the admin socket of a server
// running as uid self: the same uid, root, or a gid in groups.
func Allowed(c Cred, self uint32, groups []uint32) bool {
	return c.UID == self || c.UID == 0 || slices.Contains(groups, c.GID)
}

// PeerCred reads the credentials of the process at the other end of a
// Unix-domain connection (SO_PEERCRED).
func PeerCred(conn net.Conn) (Cred, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return Cred{}, errors.New("admin: not a Unix-domain connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, err
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("admin: SO_PEERCRED: %w", serr)
	}
	return Cred{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}
