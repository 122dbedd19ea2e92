package vaulttest

import "errors"

// ErrNotReady is returned by [StartProcess] when Vault exited or did not
// report itself initialized and unsealed (with the dev root token usable and
// the KV v2 mount present) before the context ended. The error text carries
// the tail of the server log, with secrets redacted.
var ErrNotReady = errors.New("vaulttest: vault dev server not ready")

// ErrBadOptions is returned by [Server.Provision] before anything is sent to
// Vault when the options are unusable (no directory, key of the wrong size).
var ErrBadOptions = errors.New("vaulttest: bad provisioning options")

// ErrNotRunning is returned by [Server.Pause] and [Server.Resume] when the
// server process has already exited or been stopped.
var ErrNotRunning = errors.New("vaulttest: vault server not running")
