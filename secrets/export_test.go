package secrets

// SetAfterFetch makes f run in every Refresh of v between the fetch of the
// keys and the store of what it fetched (TestConcurrentRefreshKeepsTheNewerState).
func SetAfterFetch(v *Vault, f func()) { v.afterFetch = f }
