package synth

import "errors"

// ErrInvalidOptions is returned by [Generate] when [Options] fail
// validation (Patients < 1, a tenant that is not a lowercase URI host label,
// a negative value). Nothing has been written when it is returned; the caller
// should fix the options.
var ErrInvalidOptions = errors.New("synth: invalid options")

// ErrDirNotEmpty is returned by [Generate] when the output directory exists
// and is not an empty directory (or is not a directory at all). Generate
// never overwrites or mixes into an existing data set: choose a fresh path.
var ErrDirNotEmpty = errors.New("synth: output directory is not empty")
