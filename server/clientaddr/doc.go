// Package clientaddr says which network address an HTTP request came from:
// the source address every audit record names and the key of the limit on
// failed authentications per source.
//
// By default the source is the TCP peer (http.Request.RemoteAddr) and no
// header is read: a header is whatever the client wrote. Only when the
// peer is one of the configured trusted proxies ([Proxies], the CIDRs of a
// TLS-terminating load balancer) is the source taken from the hops the
// proxies recorded: the standard Forwarded header (RFC 7239 §4, its for=
// parameters) or X-Forwarded-For, read from the right, and the right-most
// address that is not itself a trusted proxy is the source (every hop
// right of it was written by a proxy we trust; everything left of it was
// written by the client and is ignored).
//
// Invariants:
//   - A peer outside Proxies is the source whatever its headers say.
//   - A header that is missing, malformed, names "unknown" or an
//     obfuscated identifier (RFC 7239 §6.3) where an address is needed, or
//     both headers present naming different sources: the source is the
//     peer itself. Nothing here returns an error, logs or echoes a header.
//   - With a [Header] chosen (the one header the proxies write), the other
//     header is never read: a client cannot make its requests look like
//     the proxy's by sending it. With EitherHeader (the default) it can
//     (both present and disagreeing give the peer), unless the proxy
//     drops the header it does not write.
//   - Proxies never holds a prefix that matches every address (0.0.0.0/0,
//     ::/0): that would trust every client's headers.
//
// [Source] is pure; [Handler] computes it once per request and [Of] reads
// it back, for every place that needs the source (server and server/oauth).
package clientaddr
