package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/oauth"
	"github.com/custos-mcp/custos/server/ops"
)

// prepareTransport reads the principal (stdio) or loads the dev tokens or
// builds the OAuth verifier, and the TLS configuration (HTTP), before
// anything is opened.
func (a *App) prepareTransport(ctx context.Context) error {
	if s := a.o.Stdio; s != nil {
		id, err := server.LoadPrincipalFile(s.PrincipalFile)
		if err != nil {
			return err
		}
		a.ident = id
		return nil
	}
	h := a.o.HTTP
	switch {
	case h.OAuth != nil:
		oc := *h.OAuth
		oc.Logger = a.log
		v, err := oauth.New(ctx, oc)
		if err != nil {
			return err // says "oauth: ..." itself
		}
		a.verifier = v
	case h.Tokens != nil:
		a.tokens = h.Tokens
	default:
		t, err := server.LoadTokenFile(h.TokensFile, a.log)
		if err != nil {
			return err
		}
		if n := t.Unexpiring(); n > 0 && !a.o.Dev {
			// Once, at start (a reload logs its counts). The count and the
			// path: no digest, no principal.
			a.log.Warn("token file holds bearer tokens that never expire: give each an expiry ('custos token new --ttl 720h', then remove the old entry) or use OAuth (--oauth-issuer)",
				"file", h.TokensFile, "tokens_without_expiry", n)
		}
		a.tokens = t
	}
	switch {
	case h.TLSConfig != nil:
		a.tlsConfig = h.TLSConfig
	case h.CertFile != "":
		cr, err := server.NewCertReloader(h.CertFile, h.KeyFile, a.log)
		if err != nil {
			return err
		}
		a.tlsConfig = cr.TLSConfig(h.TLS12)
	}
	return nil
}

// ReloadTokens reloads the dev token file now if it changed (SIGHUP; the
// server also checks it once a second). With an error the tokens loaded
// before stay in force; without a token file there is nothing to reload.
func (a *App) ReloadTokens() error {
	if a.tokens == nil {
		return nil
	}
	return a.tokens.Reload()
}

// listen binds the MCP and the ops listeners; serving starts with Serve.
// Their address files are written by announce, once Open has everything
// up.
func (a *App) listen() error {
	if h := a.o.HTTP; h != nil {
		if a.verifier != nil {
			a.handler = a.srv.OAuthHandler(a.verifier)
		} else {
			a.handler = a.srv.HTTPHandler(a.tokens)
		}
		so := h.Server
		so.TLSConfig = a.tlsConfig
		so.Logger = a.log
		if so.MaxRequestBodyBytes == 0 {
			so.MaxRequestBodyBytes = MaxRequestBodyLimit
		}
		hs, err := server.NewHTTPServerWith(h.Listen, a.handler, so)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", h.Listen)
		if err != nil {
			return fmt.Errorf("http.listen: %w", err)
		}
		ln = server.LimitConnections(ln, so.MaxConnections)
		if limit, err := openFileLimit(); err != nil {
			a.log.Debug("the open-file limit could not be read", "err", err)
		} else {
			warnFileLimit(a.log, limit, so.MaxConnections)
		}
		scheme := "http"
		if a.tlsConfig != nil {
			ln, scheme = tls.NewListener(ln, a.tlsConfig), "https"
		}
		a.ln, a.hs = ln, hs
		a.url = fmt.Sprintf("%s://%s%s", scheme, ln.Addr(), server.MCPPath)
	}
	if o := a.o.Ops; o.Listen != "" {
		ln, err := net.Listen("tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("ops.listen: %w", err)
		}
		a.opsLn = server.LimitConnections(ln, ops.MaxConnections)
		a.opsURL = "http://" + ln.Addr().String()
		a.opsHS = ops.NewHTTPServer(o.Listen, ops.Handler(a.Health(), a.metrics, a.registry))
	}
	return nil
}

// announce writes the MCP and the ops listeners' address files. Open calls
// it last, once the admin socket, the scrubber and the sync are up: a
// script or an operator that waits for the address file then finds the
// whole server started, the admin socket included. Written by listen,
// they came before the admin socket existed, and a test that removed the
// socket as soon as the address file appeared made the server fail its
// start (access_lock_held.txtar, under load); a start that failed after
// listen left an address file behind (TestAddressFilesOnlyOnceStarted).
func (a *App) announce() error {
	if h := a.o.HTTP; h != nil {
		if err := writeAddrFile(h.AddrFile, a.url); err != nil {
			return err
		}
	}
	if o := a.o.Ops; o.Listen != "" {
		if err := writeAddrFile(o.AddrFile, a.opsURL); err != nil {
			return err
		}
	}
	return nil
}

// writeAddrFile writes url and a newline to path (if set), atomically.
func writeAddrFile(path, url string) error {
	if path == "" {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.WriteString(url + "\n")
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// URL is the MCP endpoint (scheme://host:port/mcp) once Open returned, ""
// for stdio.
func (a *App) URL() string { return a.url }

// OpsURL is the base URL of the ops endpoints, "" without Ops.Listen.
func (a *App) OpsURL() string { return a.opsURL }

// Handler is the MCP HTTP handler as served (bearer tokens or OAuth, rate
// limits, /mcp and the protected resource metadata); nil for stdio.
func (a *App) Handler() http.Handler { return a.handler }

// Serve serves the configured transport (and the ops endpoints) until ctx
// is done, the stdio session ends, or the checkpointer stops on an
// integrity error (a fork or a rollback seen while serving), whose error
// it then returns. It does not Close the App; call Close after it.
func (a *App) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go a.watchCheckpoints(ctx, cancel)
	if a.opsHS != nil {
		go a.opsHS.Serve(a.opsLn)
		a.log.Info("serving /healthz, /readyz and /metrics", "url", a.opsURL)
	}
	var err error
	if s := a.o.Stdio; s != nil {
		t := s.Transport
		if t == nil {
			t = &server.StdioTransport{In: os.Stdin, Out: os.Stdout}
		}
		a.log.Info("serving MCP on stdio", "sub", a.ident.Principal.Sub)
		err = a.srv.ServeStdio(ctx, t, a.ident)
	} else {
		err = a.serveHTTP(ctx)
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (a *App) serveHTTP(ctx context.Context) error {
	a.log.Info("serving MCP over Streamable HTTP", "url", a.url)
	errc := make(chan error, 1)
	go func() { errc <- a.hs.Serve(a.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.hs.Shutdown(sctx); err != nil {
		a.hs.Close()
	}
	return nil
}

// watchCheckpoints cancels Serve with the checkpointer's error if it stops
// on an integrity problem: the App must not go on releasing data under a
// log it can no longer anchor.
func (a *App) watchCheckpoints(ctx context.Context, stop context.CancelCauseFunc) {
	select {
	case err := <-a.ckptErr:
		a.ckptErr <- err // for anyone else who waits
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, checkpoint.ErrClosed) {
			a.log.Error("audit checkpoints stopped on an integrity error; shutting down", "err", err)
			stop(err)
		}
	case <-ctx.Done():
	}
}

// stopListeners stops the HTTP and ops servers (or closes their listeners
// if they never served).
func (a *App) stopListeners() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if a.hs != nil {
		if err := a.hs.Shutdown(ctx); err != nil {
			a.hs.Close()
		}
	}
	if a.ln != nil {
		a.ln.Close()
	}
	if a.opsHS != nil {
		a.opsHS.Shutdown(ctx)
	}
	if a.opsLn != nil {
		a.opsLn.Close()
	}
	if a.admin != nil {
		// An auditor's walk in flight ends now (audit.ErrClosed), resting
		// or not: the socket would otherwise wait for it until ctx ends.
		a.access.Close()
		a.admin.Shutdown(ctx)
	}
}
