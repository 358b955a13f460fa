package env

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Secret is a password: it is carried (JSON, for a child process) but
// never printed. Every fmt verb writes "xxxxx" for a set one, so a
// config, a topology or a route formatted into an error, a log or a plan
// cannot leak it.
type Secret string

// String implements fmt.Stringer: "xxxxx", or "" when unset.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "xxxxx"
}

// GoString implements fmt.GoStringer (%#v): redacted as String.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// Format implements fmt.Formatter: every verb (%s %v %q %x %d ...) gets
// the redacted text, so no verb reaches the bytes.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = f.Write([]byte(strconv.Quote(s.String())))
		return
	}
	_, _ = f.Write([]byte(s.String()))
}

// TLS is how the harness's clients speak TLS to a deployment: every
// node and Sentinel of it, and the fenced and Redlock Redis.
type TLS struct {
	// CAFile is a PEM file of the certificate authorities that sign the
	// servers' certificates; empty: the system's roots.
	CAFile string `json:",omitempty"`
	// CertFile and KeyFile are the client's certificate and key (PEM),
	// for a server that asks for one (tls-auth-clients); both or neither.
	CertFile string `json:",omitempty"`
	KeyFile  string `json:",omitempty"`
	// ServerName is the name the servers' certificates are checked
	// against; empty: the host of the address a connection is for (the
	// node's own address, never the proxy's that the bytes go through).
	ServerName string `json:",omitempty"`
	// InsecureSkipVerify accepts any certificate (a staging deployment
	// with self-signed certificates and no CA file): the link is
	// encrypted, not authenticated.
	InsecureSkipVerify bool `json:",omitempty"`
}

// Auth is how the harness's clients log in to a deployment's Redis
// servers: the workload's (the locks' and the fenced resources'), the
// nemesis's and the environment's own. The zero Auth is no password, no
// TLS, database 0, as lockproof's own servers are.
type Auth struct {
	// Username and Password are the data nodes' (and the fenced and
	// Redlock Redis's) AUTH: a user of Redis's ACL, or Username ""
	// for requirepass's "default" user.
	Username string `json:",omitempty"`
	Password Secret `json:",omitempty"`
	// SentinelUsername and SentinelPassword are the Sentinels' own AUTH
	// (Sentinel's requirepass), when they have one.
	SentinelUsername string `json:",omitempty"`
	SentinelPassword Secret `json:",omitempty"`
	// DB is the database the run's keys live in (SELECT), on every node
	// but a cluster's, which has database 0 only.
	DB int `json:",omitempty"`
	// TLS, when set, is spoken on every link to a Redis server.
	TLS *TLS `json:",omitempty"`
	// StoreUsername and StorePassword are a consensus store's login, when
	// the deployment is one (etcd, ZooKeeper) and its members ask for
	// one; the fenced and Redlock Redis log in with Username and Password
	// above. etcd: a user of etcd's authentication (the run's needs the
	// rights of the keys under the run's prefix, and of leases).
	// ZooKeeper: digest auth, the identity user:password, and every node
	// the lock creates carries an ACL that admits that identity alone.
	// The process and Docker environments make a login of their own
	// (etcd's user root, ZooKeeper's lockproof).
	StoreUsername string `json:",omitempty"`
	StorePassword Secret `json:",omitempty"`
	// StoreTLS, when set, is spoken on every link to a store's member
	// (etcd's client URLs over https, a client certificate for
	// --client-cert-auth; ZooKeeper's secureClientPort); TLS above is
	// the Redis servers'.
	StoreTLS *TLS `json:",omitempty"`
}

// Describe says how a logs in, for a plan or a log: who, whether a
// password is set (never what it is), the database, TLS.
func (a Auth) Describe() string {
	user := cmp.Or(a.Username, "default")
	pw := "no password"
	if a.Password != "" {
		pw = "a password (not shown)"
	}
	out := fmt.Sprintf("user %s with %s, database %d", user, pw, a.DB)
	if a.SentinelUsername != "" || a.SentinelPassword != "" {
		out += fmt.Sprintf("; sentinels: user %s", cmp.Or(a.SentinelUsername, "default"))
		if a.SentinelPassword != "" {
			out += " with a password (not shown)"
		}
	}
	out += "; " + describeTLS(a.TLS)
	if a.StoreUsername != "" || a.StorePassword != "" || a.StoreTLS != nil {
		out += "; store: " + a.DescribeStore()
	}
	return out
}

// DescribeStore says how a logs in to a consensus store's members (the
// Store fields), for a plan or a log: who, whether a password is set
// (never what it is), TLS.
func (a Auth) DescribeStore() string {
	out := "no login"
	if a.StoreUsername != "" {
		out = "user " + a.StoreUsername
		if a.StorePassword != "" {
			out += " with a password (not shown)"
		}
	}
	return out + "; " + describeTLS(a.StoreTLS)
}

// describeTLS says what t asks of a link.
func describeTLS(t *TLS) string {
	switch {
	case t == nil:
		return "no TLS"
	case t.InsecureSkipVerify:
		return "TLS without checking the servers' certificates"
	}
	out := "TLS, servers checked against " + cmp.Or(t.CAFile, "the system's roots")
	if t.ServerName != "" {
		out += " as " + t.ServerName
	}
	if t.CertFile != "" {
		out += ", client certificate " + t.CertFile
	}
	return out
}

// Secrets are a's passwords that are set (the servers', the
// Sentinels' and the store's): the texts a run redacts from whatever a lock, an adapter
// or a server sends back before it writes it (runner.Config.Secrets).
// Usernames are not secrets; a TLS key is a file, whose path is no
// secret either.
func (a Auth) Secrets() []string {
	var out []string
	for _, s := range []Secret{a.Password, a.SentinelPassword, a.StorePassword} {
		if s != "" {
			out = append(out, string(s))
		}
	}
	return out
}

// ErrBadTLS: the TLS settings do not make a client configuration (a
// file that does not read, a certificate without its key).
var ErrBadTLS = errors.New("bad TLS settings")

// Check reports what is wrong with a: a negative database, TLS files
// that do not load. field names a's place in the caller's input (e.g.
// "byo environment"), for the error.
func (a Auth) Check(field string) error {
	if a.DB < 0 {
		return fmt.Errorf("%s: DB = %d: want a database number, 0 or more", field, a.DB)
	}
	if _, err := a.tlsConfig(""); err != nil {
		return fmt.Errorf("%s: TLS: %w", field, err)
	}
	if _, err := a.StoreTLSConfig(); err != nil {
		return fmt.Errorf("%s: StoreTLS: %w", field, err)
	}
	if a.StorePassword != "" && a.StoreUsername == "" {
		// etcd's login and ZooKeeper's digest both name a user.
		return fmt.Errorf("%s: StorePassword without StoreUsername: a store's login names its user", field)
	}
	return nil
}

// StoreTLSConfig is the client TLS configuration of a's StoreTLS, or nil
// without it. Its ServerName is StoreTLS's: when empty, each store
// client names the member by the host of its own address (etcd's gRPC
// by the endpoint's, zklock by the one it dials).
func (a Auth) StoreTLSConfig() (*tls.Config, error) {
	return tlsConfigOf(a.StoreTLS, "")
}

// tlsConfig is the client TLS configuration for a connection to the
// server at addr (its host names the server unless TLS.ServerName
// does), or nil without TLS.
func (a Auth) tlsConfig(addr string) (*tls.Config, error) {
	return tlsConfigOf(a.TLS, addr)
}

// tlsConfigOf is the client TLS configuration of t for a connection to
// the server at addr (tlsConfig), or nil when t is.
func tlsConfigOf(t *TLS, addr string) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	// InsecureSkipVerify only when the user asked for it (TLS's doc).
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if c.ServerName == "" && addr != "" {
		if h, _, err := net.SplitHostPort(addr); err == nil {
			c.ServerName = h
		}
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CAFile: %w", ErrBadTLS, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CAFile %s: no PEM certificate in it", ErrBadTLS, t.CAFile)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CertFile, KeyFile: %w", ErrBadTLS, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case t.CertFile != "" || t.KeyFile != "":
		return nil, fmt.Errorf("%w: give CertFile and KeyFile together, or neither", ErrBadTLS)
	}
	return c, nil
}

// DialFunc is a dialer, as go-redis's Options.Dialer.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dialer wraps dial (nil: a plain TCP dial) with a's TLS: the
// connection dial returns for addr (perhaps through a proxy) is
// wrapped in a TLS client for the server at name(addr), or at addr
// itself when name is nil. Without TLS it returns dial. A go-redis
// client given its own Dialer does not apply its TLSConfig: clients
// that dial through proxies take this instead.
func (a Auth) Dialer(dial DialFunc, name func(addr string) string) DialFunc {
	if a.TLS == nil {
		return dial
	}
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		server := addr
		if name != nil {
			server = name(addr)
		}
		cfg, err := a.tlsConfig(server)
		if err != nil {
			return nil, err
		}
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", server, err)
		}
		return tc, nil
	}
}

// Options sets a's login, database and TLS on o, a client of the data
// node (or fenced, or Redlock Redis) at o.Addr dialled directly (o's
// Dialer nil: go-redis applies the TLSConfig itself).
func (a Auth) Options(o *redis.Options) *redis.Options {
	a.setTLS(a.Login(o))
	return o
}

// Login sets a's login and database on o and nothing else: a client
// that dials through a proxy (o.Dialer set, wrapped by Dialer for TLS).
func (a Auth) Login(o *redis.Options) *redis.Options {
	o.Username, o.Password, o.DB = a.Username, string(a.Password), a.DB
	return o
}

// LoginFailover sets a's login, database and the Sentinels' login on o,
// a Sentinel client of the master (its Dialer wrapped by Dialer for TLS).
func (a Auth) LoginFailover(o *redis.FailoverOptions) *redis.FailoverOptions {
	o.Username, o.Password, o.DB = a.Username, string(a.Password), a.DB
	o.SentinelUsername, o.SentinelPassword = a.SentinelUsername, string(a.SentinelPassword)
	return o
}

// LoginCluster sets a's login on o, a cluster client (database 0 only;
// its Dialer wrapped by Dialer for TLS).
func (a Auth) LoginCluster(o *redis.ClusterOptions) *redis.ClusterOptions {
	o.Username, o.Password = a.Username, string(a.Password)
	return o
}

// setTLS sets o's TLSConfig for the server at o.Addr. Settings that no
// longer load (Check passed on them before; a file since removed) make
// every dial fail with why, rather than dial in clear.
func (a Auth) setTLS(o *redis.Options) {
	cfg, err := a.tlsConfig(o.Addr)
	if err != nil {
		o.Dialer = func(context.Context, string, string) (net.Conn, error) { return nil, err }
		return
	}
	o.TLSConfig = cfg
}

// sentinelOptions sets the Sentinels' login and a's TLS on o, a client
// of a Sentinel.
func (a Auth) sentinelOptions(o *redis.Options) *redis.Options {
	o.Username, o.Password = a.SentinelUsername, string(a.SentinelPassword)
	a.setTLS(o)
	return o
}
