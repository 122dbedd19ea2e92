//go:build !unix

package partialdir

import "errors"

// Lock cannot lock without flock(2): it fails, and a partial directory is
// then never taken for one left behind.
func Lock(string) (release func(), ok bool, err error) {
	return nil, false, errors.New("partialdir: no flock(2) here")
}
