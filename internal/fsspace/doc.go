// Package fsspace reads a file system's size and the space still free on
// it, in bytes, for the audit log's mapping and zero-filled tail, the
// server's disk watermark and the tests that fill a small file system.
//
// Invariant: statfs's block counts (f_blocks, f_bavail) are counted in
// units of the fragment size f_frsize, as POSIX statvfs defines them and
// Linux's statfs also reports them (its f_bsize is the preferred I/O
// size, which may be larger); where no fragment size is reported (the
// BSDs' statfs, whose f_bsize is the fundamental block size) they are
// counted in f_bsize, as glibc's statvfs does. Bytes is that rule, pure.
// Free is the space an unprivileged writer may still use (f_bavail), never
// the root-reserved blocks (f_bfree).
package fsspace
