// Package admin is the local admin endpoint of a running custos server:
// HTTP/1.1 over the Unix-domain socket D/admin.sock, through which the
// auditor commands (package audit/access) reach the one process that holds
// the audit log's lock (docs/audit-access.md, decisions 2 and 3), and
// through which 'custos sync' has a running server run one FHIR sync
// (POST /v1/sync, Config.Sync; docs/import.md, "Sync from a live FHIR server"),
// and through which 'custos policy status' reads the policy in force and
// the last candidate refused (GET /v1/policy, Config.PolicyStatus: the
// server's memory, no record of the log, so no access record).
//
// # Invariants
//
//   - Nothing listens on the network: the socket is a file in the data
//     directory, mode 0600 (0660 when admin groups are configured).
//   - Every connection is checked with the kernel's peer credentials
//     (SO_PEERCRED) before any request on it is served: the peer's uid must
//     be the server's or 0, or its gid one of the configured admin groups
//     (Allowed). A refused connection gets 403 and a JSON error, and is
//     logged; nothing is recorded or read for it.
//   - The caller's identity in the access record is the peer's uid from the
//     kernel, never anything the client sends.
//   - Results stream: the response body is the operation's output as it is
//     produced. An error before the first byte is a JSON error
//     {"code","message"} with a status; an error after it is reported in the
//     trailer Custos-Error, and a complete output ends with the trailer
//     Custos-Result. A client accepts an output only with Custos-Result.
//   - Progress is asked for, never imposed: only a request with the header
//     Custos-Progress: frames/1 gets a framed body (output frames and
//     progress frames, counts only; frames.go), answered with the same
//     header. A client of before progress gets the unframed body, and a
//     server of before progress answers a client that asks unframed, which
//     the client reads as output without progress. An operation that has
//     sent a progress frame has started its response: a later error comes
//     in the trailer.
//   - No caller holds the log: a caller that does not send its request
//     body, or accept a piece of the output, within Config.WriteStall
//     (default a minute) is cut off and its operation fails (no Custos-Result),
//     which ends the operation's read transaction. A read transaction held
//     open would keep bbolt from remapping the growing log, and every
//     append, every MCP request, would wait for that caller.
//   - A client talks only to the server of the directory it names. Before
//     it sends anything on a connection, the kernel's peer credentials of
//     the answering process must be root's or those of the owner of the
//     data directory D (an account that can write to D can replace its
//     files, D/audit.db included, but not D's owner), so another
//     account's socket in a writable directory gets no request; then the
//     ping must answer the served data directory's device and inode (not
//     a symlink to, or a copy of, another server's socket). Dial refuses
//     any other with ErrOtherServer, and the command does not fall back to
//     the files then: that directory's socket is not what it seems.
//   - The server never deletes a socket it did not create, except a stale
//     one at start, which it may because it holds the audit log's exclusive
//     lock (no other server can be using it). Clients never delete it.
//
// # Caveats
//
// SO_PEERCRED reports the peer's effective uid and gid at connect time;
// supplementary groups are not seen, so an admin group must be the
// caller's primary (or effective, via sg/newgrp) group. The data directory
// (0700) must also let the caller reach the socket.
//
// A socket path longer than a socket address holds (107 bytes: a deep
// data directory) is bound and reached as /proc/self/fd/N/admin.sock
// through a descriptor of the data directory (sockAddr), so /proc must be
// mounted for such a directory.
package admin
