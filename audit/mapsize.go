package audit

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/internal/fsspace"
)

// The live segment's file mapping.
//
// bbolt reads a file through one mmap and remaps it when a commit needs
// pages past the mapping; a remap waits for every open read transaction
// to end. Readers of the live segment use short transactions (chunks),
// except a backup's copy (WriteSnapshot: one transaction for the whole
// file, as bbolt's hot backup requires), which lasts as long as an
// auditor's download. bbolt maps a new file with 32 KiB and doubles the
// mapping up to 1 GiB, then grows it by 1 GiB: an unprepared live segment
// remaps a dozen times in its first GiB and once per GiB after, and a
// remap during a backup held every append (so every list and read) until
// the copy ended.
//
// The live segment is therefore mapped, from its open, with the size of
// its file system (rounded up to a GiB, at least 1 GiB): the file can
// never outgrow it, so it never remaps while the server runs (unless the
// volume itself is grown). The mapping is address space, not memory: pages
// are read in only as they are touched, and a file is never extended to
// the mapping (bbolt grows it as it fills, outside Windows). Where the
// address space is limited (RLIMIT_AS) and the mapping fails, the segment
// is opened as bbolt would by default and a warning says what that means.

const (
	mapStep = 1 << 30 // bbolt's mapping step past 1 GiB
	// mapMax keeps the reservation well under bbolt's largest mapping
	// (256 TiB on 64-bit platforms).
	mapMax = 1 << 46
)

// bboltMapMax is bbolt's largest mapping (its internal MaxMapSize) where
// it is below mapMax on a 64-bit platform: 512 GiB on mips64 and mips64le
// (go.etcd.io/bbolt/internal/common/bolt_mips64x.go). A reservation above
// it makes bolt.Open fail ('mmap too large'), not fall back.
var bboltMapMax = map[string]int64{"mips64": 0x8000000000, "mips64le": 0x8000000000}

// liveMapSize is the mapping to reserve for a live segment on a file
// system of fsBytes bytes: fsBytes rounded up to a GiB, at least 1 GiB and
// at most mapMax and bbolt's largest mapping (bboltMapMax). 0 (bbolt's
// default) on 32-bit platforms, where address space is scarce, and where
// the size is unknown (fsBytes <= 0).
func liveMapSize(fsBytes int64) int {
	if strconv.IntSize < 64 {
		return 0
	}
	return int(liveMapSizeOn(runtime.GOARCH, fsBytes))
}

// liveMapSizeOn is liveMapSize on a 64-bit goarch: also at most bbolt's
// largest mapping there (bboltMapMax).
func liveMapSizeOn(goarch string, fsBytes int64) int64 {
	if fsBytes <= 0 {
		return 0
	}
	n := (fsBytes + mapStep - 1) / mapStep * mapStep
	n = max(n, mapStep)
	limit := int64(mapMax)
	if m, ok := bboltMapMax[goarch]; ok {
		limit = min(limit, m)
	}
	return min(n, limit)
}

// openLiveDB opens (creating) the live segment's bbolt file at path with
// its mapping reserved (liveMapSize of the file system holding it). If the
// reservation is refused (ENOMEM: a limited address space) it opens the
// file with bbolt's default mapping and warns. It also returns the
// zero-filled tail (tail.go) that the batcher keeps for the file, on
// bbolt's own handle of it.
func openLiveDB(path string, o bolt.Options, log *slog.Logger) (*bolt.DB, *zeroTail, error) {
	fsBytes, _ := fsspace.Size(filepath.Dir(path))
	o.InitialMmapSize = liveMapSize(fsBytes)
	var file *os.File
	open := o.OpenFile
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := open(name, flag, perm)
		file = f
		return f, err
	}
	db, err := bolt.Open(path, 0o600, &o)
	if err != nil && o.InitialMmapSize > 0 && errors.Is(err, syscall.ENOMEM) {
		log.Warn("audit: the live segment's mapping could not be reserved (address space limited); a long backup may delay appends while the file grows",
			"reserve_bytes", o.InitialMmapSize, "err", err)
		o.InitialMmapSize = 0
		db, err = bolt.Open(path, 0o600, &o)
	}
	if err != nil {
		return nil, nil, err
	}
	return db, &zeroTail{file: file, log: log}, nil
}
