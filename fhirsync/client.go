package fhirsync

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// client does the HTTP of one sync: bearer token, retries with backoff,
// one re-authentication on 401, and errors that name only the URL path.
type client struct {
	o    *Options
	base *url.URL
	auth *authenticator // nil: no authorization
	// requests counts HTTP requests sent (retries included), for tests and
	// the outcome record; atomic, as Binaries are fetched concurrently.
	requests atomic.Int64
	// anyOrigin lets resolve accept URLs on another origin; only for a
	// client without a token (Bulk files with requiresAccessToken false).
	anyOrigin bool
	// creds are the sync's credentials, redacted from its messages;
	// shared by the clients of one sync.
	creds *credentials
}

// where names a URL in messages: its path only, never the query (a
// pre-signed URL carries credentials there) or user information.
func where(u *url.URL) string {
	if u.Path == "" {
		return "/"
	}
	return u.Path
}

// logged names a request to u in a log line: its method and path, the path
// scrubbed (quiet) as a sync's error is (quietErr), since a server chooses
// the paths of its status URL and of its files, which may hold a
// telephone or record number (TestRemotePathsInLogLinesAreScrubbed).
func logged(method string, u *url.URL) string { return quiet(method + " " + where(u)) }

// resolve makes ref (absolute, or relative to the base) a URL. It must be
// on the base's scheme and host: a server cannot send the token elsewhere
// (a manifest or a next link naming another host is refused).
func (c *client) resolve(ref string) (*url.URL, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: unparsable URL in the server's answer", ErrServer)
	}
	if !u.IsAbs() {
		b := *c.base
		b.Path += "/"
		u = b.ResolveReference(u)
	}
	if c.anyOrigin && c.auth == nil && (u.Scheme == "https" || u.Scheme == c.base.Scheme) && u.Host != "" {
		return u, nil
	}
	if !sameOrigin(u, c.base) {
		return nil, fmt.Errorf("%w: %s: URL on another origin than the FHIR base; refused (the access token is never sent elsewhere)", ErrServer, where(u))
	}
	return u, nil
}

// origin is u's RFC 6454 origin: its scheme, its host in lower case, and
// its port, the scheme's default when none is written.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// sameOrigin reports whether a and b have the same origin, whatever the
// spelling of their hosts and default ports.
func sameOrigin(a, b *url.URL) bool {
	return origin(a) == origin(b)
}

// redirectError is a redirect checkRedirect refused.
type redirectError struct {
	code int    // the redirect's HTTP status
	host string // the Location's host (never its path or query)
}

func (e *redirectError) Error() string {
	return fmt.Sprintf("redirected (HTTP %d) to another origin (%s)", e.code, e.host)
}

// checkRedirect is the CheckRedirect of a sync's HTTP client. Go's client
// forwards the Authorization header to any port and scheme of the same
// host name (and its subdomains), and re-sends a POST body on 307/308
// anywhere: so a redirect of a request that carries a credential — a
// bearer token, or the token request's client assertion (any non-GET) —
// is followed only within the first request's origin, as resolve allows
// for links; and no redirect goes from https to http. Then prev (the
// caller's policy), or Go's default of at most 10 redirects.
func checkRedirect(prev func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0]
		credential := first.Header.Get("Authorization") != "" || first.Method != http.MethodGet
		if (credential && !sameOrigin(req.URL, first.URL)) || (first.URL.Scheme == "https" && req.URL.Scheme != "https") {
			code := 0
			if req.Response != nil {
				code = req.Response.StatusCode
			}
			return &redirectError{code: code, host: req.URL.Host}
		}
		if prev != nil {
			return prev(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// statusError is a non-retryable HTTP answer.
func statusError(req *http.Request, resp *http.Response) error {
	msg := fmt.Sprintf("%s %s: HTTP %d", req.Method, where(req.URL), resp.StatusCode)
	if code := oauthErrorCode(req, resp); code != "" {
		msg += " (OAuth error " + code + ")"
		if code == "invalid_scope" {
			msg += ": the token endpoint does not grant the scope asked for; ask for one it grants (--scope)"
		}
		return fmt.Errorf("%w: %s", ErrAuth, msg)
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		switch {
		case req.Header.Get("Authorization") == "":
		case resp.StatusCode == http.StatusForbidden:
			// The token is valid (a 401 would say it is not) but does not
			// cover this request.
			msg += " (the access token is not allowed this request: the scope the token endpoint granted, or the server's access policy for this client, does not cover it; see --scope)"
		default:
			msg += " (the server refused a fresh access token)"
		}
		return fmt.Errorf("%w: %s", ErrAuth, msg)
	}
	return fmt.Errorf("%w: %s", ErrServer, msg)
}

// oauthErrors are the error codes of a token endpoint's error response
// (RFC 6749 section 5.2): the only part of it named in an error.
// error_description and error_uri are the server's free text and are not.
var oauthErrors = map[string]bool{
	"invalid_request": true, "invalid_client": true, "invalid_grant": true,
	"unauthorized_client": true, "unsupported_grant_type": true, "invalid_scope": true,
}

// oauthErrorCode returns the registered OAuth error code of a token
// request's 400 or 401 answer (the form POST of the client_credentials
// grant), or "".
func oauthErrorCode(req *http.Request, resp *http.Response) string {
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-www-form-urlencoded" ||
		(resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnauthorized) {
		return ""
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 16<<10)).Decode(&e) != nil || !oauthErrors[e.Error] {
		return ""
	}
	return e.Error
}

// retryable reports whether an HTTP status is worth retrying.
func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// maxRetryAfter bounds a parsed Retry-After: any longer wait is beyond
// every deadline of a sync, and seconds times time.Second must not wrap
// (Retry-After: 10000000000 wrapped to a negative wait, and the status
// poll then ran in a tight loop past its deadline).
const maxRetryAfter = 24 * time.Hour

// retryAfter parses Retry-After (seconds or an HTTP date), at most
// maxRetryAfter; 0 when absent.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseUint(v, 10, 64); err == nil {
		return time.Duration(min(s, uint64(maxRetryAfter/time.Second))) * time.Second
	} else if errors.Is(err, strconv.ErrRange) {
		return maxRetryAfter
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// backoff is the wait before retry n (0-based): full jitter in [d/2, d]
// with d = min(base·2^n, max), raised to the server's Retry-After (capped
// at max).
func backoff(n int, base, maxd, after time.Duration) time.Duration {
	d := maxd
	if n < 30 && base<<n > 0 && base<<n < maxd {
		d = base << n
	}
	d = d/2 + rand.N(d/2+1)
	if after > d {
		d = min(after, maxd)
	}
	return d
}

// do sends a request built by mk (called again for every attempt) and
// returns a 2xx response or an error. 202 is a success (Bulk status). It
// retries 429, 5xx and transport errors, and re-authenticates once on 401.
func (c *client) do(ctx context.Context, mk func(ctx context.Context) (*http.Request, error)) (*http.Response, error) {
	reauthed := false
	var last string
	start := c.o.Now()
	for attempt := 0; ; attempt++ {
		// Each attempt has its own context, which a body that stops
		// flowing cancels (idleBody).
		rctx, cancel := context.WithCancel(ctx)
		req, err := mk(rctx)
		if err != nil {
			cancel()
			return nil, err
		}
		if c.auth != nil {
			tok, err := c.auth.token(ctx)
			if err != nil {
				cancel()
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		c.requests.Add(1)
		resp, err := c.o.HTTPClient.Do(req)
		var after time.Duration
		switch {
		case err != nil:
			cancel() // no body to read
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// A refused redirect is the server's answer, not a transport
			// fault: not retried.
			var re *redirectError
			if errors.As(err, &re) {
				return nil, fmt.Errorf("%w: %s %s: %v; refused (a credential is never sent to another origin)", ErrServer, req.Method, where(req.URL), re)
			}
			// An untrusted certificate stays untrusted: not retried.
			var cve *tls.CertificateVerificationError
			if errors.As(err, &cve) {
				return nil, fmt.Errorf("%w: %s %s: %v", ErrServer, req.Method, where(req.URL), c.creds.redact(transportCause(err).Error()))
			}
			// The transport's error text can hold the full URL: name the path.
			last = c.creds.redact(fmt.Sprintf("%s %s: %v", req.Method, where(req.URL), transportCause(err)))
		case resp.StatusCode == http.StatusUnauthorized && c.auth != nil && !reauthed:
			drain(resp)
			c.auth.invalidate(req.Header.Get("Authorization"))
			reauthed = true
			attempt--
			cancel()
			continue
		case retryable(resp.StatusCode):
			after = retryAfter(resp.Header, c.o.Now())
			drain(resp)
			last = fmt.Sprintf("%s %s: HTTP %d", req.Method, where(req.URL), resp.StatusCode)
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			resp.Body = newIdleBody(resp.Body, c.o.HeaderTimeout, cancel)
			return resp, nil
		default:
			err := statusError(req, resp) // reads a token endpoint's error code
			drain(resp)
			cancel()
			return nil, err
		}
		cancel()
		if attempt+1 >= c.o.MaxAttempts {
			return nil, fmt.Errorf("%w: %s; gave up after %d attempts over %s", ErrUnavailable, last, attempt+1, c.o.Now().Sub(start).Round(time.Millisecond))
		}
		wait := backoff(attempt, c.o.BaseDelay, c.o.MaxDelay, after)
		c.o.Logger.Warn("fhirsync: retrying", "request", quiet(hideBinaryIDs(last)), "attempt", attempt+1, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// binaryIDPath is the path of a Binary read (GET [base]/Binary/<id>).
var binaryIDPath = regexp.MustCompile(`/Binary/[A-Za-z0-9.\-]+`)

// hideBinaryIDs shows every Binary read's path in s as /Binary/[id], as
// fetchBinaries' errors do (idHidden): a source id may carry PHI (an MRN
// used as an id), and a retry's log line is no place for it.
func hideBinaryIDs(s string) string {
	return binaryIDPath.ReplaceAllString(s, "/Binary/[id]")
}

// transportCause strips the URL from a *url.Error.
//
// Go's HTTP client quotes the server's bytes in the error for a malformed
// answer ("malformed MIME header: missing colon: \"<line>\"", "malformed
// HTTP response \"<line>\""): such an error is errMalformedAnswer, never
// the quote, which was copied into the sync's error, its sync/end audit
// record and the retry log line (TestRemoteTextNeverInMessages).
func transportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if msg := err.Error(); strings.Contains(msg, "malformed") || strings.Contains(msg, `"`) {
		return errMalformedAnswer
	}
	return err
}

// drain discards a little of the body so the connection can be reused,
// then closes it.
func drain(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}

// get is a GET of u with the given Accept header.
func (c *client) get(ctx context.Context, u *url.URL, accept string, hdr http.Header) (*http.Response, error) {
	return c.do(ctx, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadConfig, where(u), err)
		}
		req.Header.Set("Accept", accept)
		for k, v := range hdr {
			req.Header[k] = v
		}
		return req, nil
	})
}

// checkType refuses a response whose media type is not one of want, or
// whose charset is not UTF-8: FHIR's JSON is UTF-8 (RFC 8259 section 8.1),
// and bytes of another charset would reach the catalog as invalid UTF-8.
func checkType(resp *http.Response, want ...string) error {
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err == nil {
		for _, w := range want {
			if mt != w {
				continue
			}
			if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
				named := "a charset IANA does not register (not repeated)"
				if n := namedCharset(cs); n != "" {
					named = fmt.Sprintf("charset %q", n)
				}
				return fmt.Errorf("%w: %s %s: %s; FHIR JSON is UTF-8", ErrServer, resp.Request.Method, where(resp.Request.URL), named)
			}
			return nil
		}
	}
	// The Content-Type is the server's text (its parameters any string):
	// only a common media type is named.
	got := "a content type that is none of FHIR's or of a file type (not repeated)"
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && namedMediaType(mt) != "" {
		got = "content type " + namedMediaType(mt)
	}
	return fmt.Errorf("%w: %s %s: %s, want %s", ErrServer, resp.Request.Method, where(resp.Request.URL),
		got, strings.Join(want, " or "))
}

// Media types accepted for FHIR JSON and NDJSON.
var (
	jsonTypes = []string{"application/fhir+json", "application/json", "application/json+fhir"}
	// binary/octet-stream is not registered, but it is what Amazon S3 and
	// its SDKs label an object uploaded without a type, which a Bulk
	// server's pre-signed output URLs may serve.
	ndjsonTypes = []string{"application/fhir+ndjson", "application/ndjson", "application/x-ndjson", "application/octet-stream", "binary/octet-stream", "text/plain"}
)

// errStalled: a response body sent nothing for HeaderTimeout.
var errStalled = errors.New("stalled")

// idleBody is a response body whose every read waits at most idle: a
// server (or proxy) that sends headers and then stops sending, leaving
// the connection open, would otherwise hold the sync, and the base's lock,
// forever. When idle passes without data, the request's context is
// cancelled and the read fails with errStalled (the caller names the
// request).
type idleBody struct {
	rc     io.ReadCloser
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
}

func newIdleBody(rc io.ReadCloser, idle time.Duration, cancel context.CancelFunc) *idleBody {
	b := &idleBody{rc: rc, idle: idle, cancel: cancel}
	b.timer = time.AfterFunc(idle, func() { b.fired.Store(true); cancel() })
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && b.fired.Load() {
		return n, fmt.Errorf("%w: no data for %s", errStalled, b.idle)
	}
	if n > 0 {
		b.timer.Reset(b.idle)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.rc.Close()
	b.cancel()
	return err
}
