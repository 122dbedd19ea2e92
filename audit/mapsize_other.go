//go:build !unix

package audit

import "errors"

// fsSize is unknown here: bbolt on Windows extends the file to its
// mapping, so the live segment keeps bbolt's default mapping.
func fsSize(string) (int64, error) {
	return 0, errors.New("audit: file system size unknown on this platform")
}
