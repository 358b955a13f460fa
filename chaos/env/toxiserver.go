package env

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/gorilla/mux"
	"github.com/rs/zerolog"
)

// ToxiServer is a real Toxiproxy server running inside this process, its
// HTTP API served on a free loopback port. Drive it through its API (the
// Toxiproxy client package), as one would a separate toxiproxy-server.
//
// toxiproxy.ApiServer.Listen cannot be stopped (and exits the process on
// error), so ToxiServer routes the server's own exported handlers through an
// http.Server it can shut down.
type ToxiServer struct {
	// URL is the API endpoint, http://127.0.0.1:port.
	URL string
	// API is a client of the API.
	API *toxiclient.Client

	api  *toxiproxy.ApiServer
	http *http.Server
	done chan struct{}
}

// StartToxiproxy starts an in-process Toxiproxy server with its API on a free
// loopback port and waits until the API answers.
func StartToxiproxy(ctx context.Context) (*ToxiServer, error) {
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	r := mux.NewRouter()
	r.HandleFunc("/reset", api.ResetState).Methods("POST")
	r.HandleFunc("/proxies", api.ProxyIndex).Methods("GET")
	r.HandleFunc("/proxies", api.ProxyCreate).Methods("POST")
	r.HandleFunc("/populate", api.Populate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}", api.ProxyShow).Methods("GET")
	r.HandleFunc("/proxies/{proxy}", api.ProxyUpdate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}", api.ProxyDelete).Methods("DELETE")
	r.HandleFunc("/proxies/{proxy}/toxics", api.ToxicIndex).Methods("GET")
	r.HandleFunc("/proxies/{proxy}/toxics", api.ToxicCreate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}/toxics/{toxic}", api.ToxicShow).Methods("GET")
	r.HandleFunc("/proxies/{proxy}/toxics/{toxic}", api.ToxicUpdate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}/toxics/{toxic}", api.ToxicDelete).Methods("DELETE")
	r.HandleFunc("/version", api.Version).Methods("GET")

	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start toxiproxy: listen: %w", err)
	}
	s := &ToxiServer{
		URL: "http://" + l.Addr().String(),
		api: api,
		http: &http.Server{
			Handler:      http.TimeoutHandler(apiGuard(r, l.Addr().(*net.TCPAddr).Port), 25*time.Second, "toxiproxy api timeout"),
			ReadTimeout:  10 * time.Second,
			WriteTimeout: 30 * time.Second,
		},
		done: make(chan struct{}),
	}
	s.API = toxiclient.NewClient(s.URL)
	go func() {
		defer close(s.done)
		_ = s.http.Serve(l)
	}()
	for {
		if _, err := s.API.Proxies(); err == nil {
			return s, nil
		}
		select {
		case <-ctx.Done():
			_ = s.Close(context.Background())
			return nil, fmt.Errorf("start toxiproxy: api not ready: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ProxyCount returns how many proxies the server holds.
func (s *ToxiServer) ProxyCount() int { return len(s.api.Collection.Proxies()) }

// Close removes every proxy (closing their connections) and stops the API.
func (s *ToxiServer) Close(ctx context.Context) error {
	_ = s.api.Collection.Clear()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		_ = s.http.Close()
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("stop toxiproxy: %w", ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("stop toxiproxy: %w", err)
	}
	return nil
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
