//go:build !unix

package access

import "errors"

// lockDir cannot lock without flock(2): a partial directory is then never
// taken for one left behind.
func lockDir(string) (release func(), ok bool, err error) {
	return nil, false, errors.New("no flock")
}
