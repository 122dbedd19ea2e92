package main

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/server"
)

// TestHTTPServerOptions: the limits serve passes (from flags or the file)
// reach the http.Server, zero values take the defaults, and plain HTTP off
// loopback is refused.
func TestHTTPServerOptions(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, "too large", http.StatusRequestEntityTooLarge)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	})
	tests := []struct {
		name    string
		addr    string
		o       server.HTTPOptions
		wantErr bool
		check   func(*http.Server) string
	}{
		{"defaults", "127.0.0.1:0", server.HTTPOptions{}, false, func(s *http.Server) string {
			if s.ReadHeaderTimeout != server.DefaultReadHeaderTimeout || s.ReadTimeout != server.DefaultReadTimeout ||
				s.IdleTimeout != server.DefaultIdleTimeout || s.MaxHeaderBytes != server.DefaultMaxHeaderBytes || s.WriteTimeout != 0 {
				return "defaults not applied"
			}
			return ""
		}},
		{"explicit", "127.0.0.1:0", server.HTTPOptions{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second, MaxHeaderBytes: 8192}, false, func(s *http.Server) string {
			if s.ReadHeaderTimeout != time.Second || s.ReadTimeout != 2*time.Second || s.WriteTimeout != 3*time.Second || s.IdleTimeout != 4*time.Second || s.MaxHeaderBytes != 8192 {
				return "explicit values not kept"
			}
			return ""
		}},
		{"plain off loopback", "0.0.0.0:8080", server.HTTPOptions{}, true, nil},
		{"tls off loopback", "0.0.0.0:8443", server.HTTPOptions{TLSConfig: &tls.Config{}}, false, func(s *http.Server) string {
			if s.TLSConfig == nil {
				return "TLS config dropped"
			}
			return ""
		}},
		{"negative", "127.0.0.1:0", server.HTTPOptions{ReadTimeout: -time.Second}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := server.NewHTTPServerWith(tc.addr, h, tc.o)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, server.ErrBadConfig) {
					t.Errorf("err = %v, want ErrBadConfig", err)
				}
				return
			}
			if msg := tc.check(s); msg != "" {
				t.Error(msg)
			}
		})
	}
	// The old signature still works.
	if s, err := server.NewHTTPServer("127.0.0.1:0", h); err != nil || s.ReadHeaderTimeout != server.DefaultReadHeaderTimeout {
		t.Errorf("NewHTTPServer = %v, %v", s, err)
	}

	s, err := server.NewHTTPServerWith("127.0.0.1:0", h, server.HTTPOptions{MaxRequestBodyBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		size int
		want int
	}{{4096, http.StatusNoContent}, {4097, http.StatusRequestEntityTooLarge}} {
		rec := httptest.NewRecorder()
		s.Handler.ServeHTTP(rec, httptest.NewRequest("POST", "/mcp", strings.NewReader(strings.Repeat("x", c.size))))
		if rec.Code != c.want {
			t.Errorf("body of %d bytes: status %d, want %d", c.size, rec.Code, c.want)
		}
	}
}
