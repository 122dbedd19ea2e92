//go:build !(linux || darwin || freebsd || dragonfly)

package fsspace

import "os"

// Size is unknown here (ErrUnsupported).
func Size(string) (int64, error) { return 0, ErrUnsupported }

// Free is unknown here (ErrUnsupported).
func Free(string) (int64, error) { return 0, ErrUnsupported }

// FreeOf is unknown here (ErrUnsupported).
func FreeOf(*os.File) (int64, error) { return 0, ErrUnsupported }
