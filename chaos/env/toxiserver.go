package env

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
			Handler:      http.TimeoutHandler(r, 25*time.Second, "toxiproxy api timeout"),
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
