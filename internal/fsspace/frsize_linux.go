package fsspace

import "golang.org/x/sys/unix"

// fragmentSize is st's f_frsize, the unit of its block counts (Bytes).
func fragmentSize(st *unix.Statfs_t) int64 { return int64(st.Frsize) }
