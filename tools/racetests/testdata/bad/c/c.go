package c

// Start starts a goroutine that no test drives under -race.
func Start(f func()) { go f() }
