package a

// Start starts a goroutine: package a needs a test under -race.
func Start(f func()) { go f() }
