package fhirin

import (
	"os"
	"syscall"
	"time"
)

// changeTime is the file's status change time (st_ctime): set by the
// kernel on every write, rename and change of its times, and by no utime
// call to a time of the caller's choosing, so that touch -d, which sets a
// modification time back, moves it.
func changeTime(fi os.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Unix())
	}
	return time.Time{}
}
