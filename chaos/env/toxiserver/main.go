//go:build ignore

// Command toxiserver is the Toxiproxy server lockproof runs: upstream's API
// (github.com/Shopify/toxiproxy/v2, its own routes and proxies) behind
// lockproof's guard, on a free loopback port. env.StartToxiproxy builds it
// once from this file (go.mod.txt and go.sum.txt beside it pin upstream's
// version) into the user's cache directory and starts it as a child
// process.
//
// Why a process of its own and not a server in the caller's process: the
// server imports Prometheus and its tree, and a user's module that imports
// lockproof would list them all (62 modules against 35 with the client
// alone). The file carries the "ignore" build tag so that no package of
// lockproof imports the server and go mod tidy leaves it out of go.mod.
//
// Protocol with the parent: the server prints one line, "toxiproxy
// http://127.0.0.1:PORT/TOKEN", once its API listens (the port is the
// kernel's choice, so no other process can race for it; TOKEN is a secret
// of this server, and a request whose path does not start with it is
// refused: tokenGuard), then serves until its
// standard input closes (the parent closed it, or died). It then removes
// every proxy, closing their connections, and exits.
package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "toxiserver:", err)
		os.Exit(1)
	}
}

func run() error {
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	token := hex.EncodeToString(tok)
	srv := &http.Server{
		Handler:           tokenGuard(token, apiGuard(api.Routes(), l.Addr().(*net.TCPAddr).Port)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "toxiproxy http://%s/%s\n", l.Addr(), token)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("announce: %w", err)
	}

	stdin := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stdin) }()
	select {
	case <-stdin:
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	}
	_ = api.Collection.Clear()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// tokenGuard admits only the requests whose path starts with /token, the
// run's own secret (announced on the server's stdout, which only its
// parent reads), and serves them to next with the prefix taken off: the
// Toxiproxy client takes the endpoint http://127.0.0.1:PORT/token as it
// is. Another local process that finds the port (it is in
// /proc/net/tcp) can neither add toxics to falsify a run nor make a
// proxy that listens beyond loopback.
func tokenGuard(token string, next http.Handler) http.Handler {
	prefix := "/" + token
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first, rest := r.URL.Path, ""
		if i := strings.IndexByte(r.URL.Path[1:], '/'); i >= 0 {
			first, rest = r.URL.Path[:i+1], r.URL.Path[i+1:]
		}
		if subtle.ConstantTimeCompare([]byte(first), []byte(prefix)) != 1 {
			http.Error(w, "toxiproxy api: this server takes requests under its run's token only", http.StatusForbidden)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = cmp.Or(rest, "/")
		r2.URL.RawPath = ""
		next.ServeHTTP(w, r2)
	})
}

// apiGuard keeps what is not a lockproof client off the API on port: a web
// page the user has open (a run's proxies are on loopback, in reach of
// any page's requests) or a DNS-rebound name. Upstream's server refuses
// browsers by their User-Agent; this also refuses any request a browser
// marks as its own (Origin, Sec-Fetch-Site), any Host but the loopback
// address and port, and a body that creates something (a proxy, a toxic,
// a populate) unless it is application/json, which a page cannot send to
// another origin without a CORS preflight the API never answers. The
// Toxiproxy client sends text/plain only to update a proxy and to reset.
func apiGuard(next http.Handler, port int) http.Handler {
	p := strconv.Itoa(port)
	hosts := map[string]bool{"127.0.0.1:" + p: true, "localhost:" + p: true, "[::1]:" + p: true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !hosts[r.Host]:
			http.Error(w, "toxiproxy api: Host "+strconv.Quote(r.Host)+" refused: loopback only", http.StatusForbidden)
			return
		case r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" || strings.HasPrefix(r.UserAgent(), "Mozilla/"):
			http.Error(w, "toxiproxy api: requests from a browser are refused", http.StatusForbidden)
			return
		case r.Method == http.MethodPost && creates(r.URL.Path):
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				http.Error(w, "toxiproxy api: want Content-Type application/json", http.StatusUnsupportedMediaType)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// creates reports whether a POST to path creates a proxy or a toxic.
func creates(path string) bool {
	return path == "/proxies" || path == "/populate" || strings.HasSuffix(path, "/toxics")
}
