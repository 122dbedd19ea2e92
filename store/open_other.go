//go:build !unix

package store

const openNonblock = 0
