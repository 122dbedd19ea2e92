//go:build !unix

package app

const (
	reads    = 0
	lists    = 0
	writesIn = 0
)

// denied: elsewhere the opens themselves say so, at startup.
func denied(string, uint32) error { return nil }
