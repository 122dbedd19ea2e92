package app

import (
	"cmp"
	"log/slog"

	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
)

// fileMargin is the open files serve may need besides the connections of
// its two listeners: the data directory's files (audit.db and a sealed
// segment being verified, catalog.db, grants.db, the checkpoint files,
// the admin socket and its clients), connections to Vault and the OAuth
// issuer, the listeners themselves, stdio and the Go runtime's own.
const fileMargin = 64

// filesNeeded is how many open files serve may need with every slot of
// the MCP listener (maxConnections, 0: the default) and of the ops
// listener taken: http.max_connections + ops.MaxConnections + fileMargin.
func filesNeeded(maxConnections int) uint64 {
	return uint64(cmp.Or(maxConnections, server.DefaultMaxConnections) + ops.MaxConnections + fileMargin)
}

// warnFileLimit warns on log if limit, the process's open-file limit
// (RLIMIT_NOFILE: Go raises the soft limit to the hard one at start on
// Linux), is below filesNeeded(maxConnections), and reports whether it
// did. It warns rather than refuses: past the limit a connection is not
// accepted (net/http retries after a pause) and a file that cannot be
// opened fails its request closed, so nothing is released that should not
// be; but connections wait, and a server that never sees that many would
// be stopped for nothing.
func warnFileLimit(log *slog.Logger, limit uint64, maxConnections int) bool {
	need := filesNeeded(maxConnections)
	if limit >= need {
		return false
	}
	log.Warn("the open-file limit is below what http.max_connections needs: raise it (LimitNOFILE= in the systemd unit, ulimit -n) or lower http.max_connections",
		"open_file_limit", limit, "needed", need, "max_connections", cmp.Or(maxConnections, server.DefaultMaxConnections),
		"ops_connections", ops.MaxConnections, "other_files", fileMargin)
	return true
}
