package env

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/contract"
)

// BYOConfig describes an existing deployment ("bring your own"), for teams
// that run faults against staging. The environment creates its client proxies
// on the given Toxiproxy server; it starts and stops no Redis, and it cannot
// pause, kill or restart servers (ErrUnsupported). Replication links are not
// proxied (Node.ReplProxy is ""), unless the deployment routes them through
// Toxiproxy itself.
type BYOConfig struct {
	// ToxiproxyURL is the Toxiproxy API, e.g. http://toxiproxy:8474. Required.
	ToxiproxyURL string
	// ProxyListenHost is the host new proxies listen on, as the Toxiproxy
	// server sees it; default "127.0.0.1" (use "0.0.0.0" for a remote server).
	ProxyListenHost string
	// ProxyDialHost is the host clients dial to reach those proxies; default
	// the host of ToxiproxyURL.
	ProxyDialHost string
	// MasterName is the Sentinel master name; default "lockproof".
	MasterName string
	// Sentinels are Sentinel addresses (host:port). With Sentinels, the data
	// nodes are discovered (SENTINEL MASTER and REPLICAS) unless Data is set.
	Sentinels []string
	// Data are the addresses of the master (first) and its replicas, as
	// Sentinel reports them. Without Sentinels, Data[0] is a lone master.
	Data []string
	// Cluster are seed addresses (host:port) of a Redis Cluster: the
	// deployment is then that cluster (the cluster topology), its nodes
	// discovered from the first seed that answers (DiscoverCluster), and
	// MasterName, Sentinels and Data must be unset.
	Cluster []string
	// Etcd and ZooKeeper are the client addresses (host:port) of every
	// member of a consensus store: the deployment is then that store (the
	// etcd or zookeeper topology), and MasterName, Sentinels, Data and
	// Cluster must be unset. Only the clients' faults run on it: lockproof
	// neither kills, pauses nor cuts off a store it does not run.
	Etcd      []string `json:",omitempty"`
	ZooKeeper []string `json:",omitempty"`
	// Fenced is the address of the Redis for fenced resources. Required.
	Fenced string
	// Redlock are independent Redlock masters (optional).
	Redlock []string
	// Auth is how every client logs in to the deployment's servers:
	// username and password (the data nodes', the fenced and Redlock
	// Redis's; the Sentinels' apart), database, TLS; and a consensus
	// store's own login and TLS (StoreUsername, StorePassword, StoreTLS:
	// an etcd user, or ZooKeeper's digest identity user:password, which
	// the ACL of every node the run creates admits alone). Its passwords
	// are never written anywhere (Secret).
	Auth
}

// BYOEnv is an existing deployment behind a given Toxiproxy server.
type BYOEnv struct {
	cfg  BYOConfig
	srv  ProxyServer
	topo Topology

	mu     sync.Mutex
	closed bool
}

// NewBYO checks cfg, discovers the data nodes through Sentinel when needed,
// and checks that the Toxiproxy API answers.
func NewBYO(ctx context.Context, cfg BYOConfig) (*BYOEnv, error) {
	if cfg.ToxiproxyURL == "" {
		return nil, errors.New("byo environment: ToxiproxyURL is required")
	}
	u, err := url.Parse(cfg.ToxiproxyURL)
	if err != nil || u.Host == "" {
		// Not the text given: it may hold a password (user:pw@host).
		return nil, errors.New("byo environment: ToxiproxyURL does not parse as a URL with a host: want http://host:port")
	}
	if cfg.Fenced == "" {
		return nil, errors.New("byo environment: Fenced (address of the Redis for fenced resources) is required")
	}
	kinds := 0
	for _, n := range []int{len(cfg.Sentinels) + len(cfg.Data), len(cfg.Cluster), len(cfg.Etcd), len(cfg.ZooKeeper)} {
		if n > 0 {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, errors.New("byo environment: give one deployment, not both: Sentinels and Data (Redis with Sentinel), Cluster (a Redis Cluster's seeds), Etcd or ZooKeeper (a consensus store's members)")
	}
	if kinds == 0 {
		return nil, errors.New("byo environment: give Sentinels, Data, Cluster, Etcd or ZooKeeper")
	}
	for field, addrs := range map[string][]string{"Sentinels": cfg.Sentinels, "Data": cfg.Data, "Cluster": cfg.Cluster,
		"Etcd": cfg.Etcd, "ZooKeeper": cfg.ZooKeeper, "Redlock": cfg.Redlock, "Fenced": {cfg.Fenced}} {
		for i, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("byo environment: %s[%d] = %q: want host:port: %w", field, i, a, err)
			}
		}
	}
	if err := cfg.Auth.Check("byo environment"); err != nil {
		return nil, err
	}
	if (cfg.StoreUsername != "" || cfg.StorePassword != "" || cfg.StoreTLS != nil) && len(cfg.Etcd)+len(cfg.ZooKeeper) == 0 {
		// Said, not ignored: a login given for nothing is a config
		// that means something else.
		return nil, errors.New("byo environment: StoreUsername, StorePassword and StoreTLS are a consensus store's login: give Etcd or ZooKeeper, or unset them")
	}
	if len(cfg.Cluster) > 0 && cfg.DB != 0 {
		return nil, fmt.Errorf("byo environment: DB = %d: a Redis Cluster has database 0 only", cfg.DB)
	}
	if cfg.MasterName == "" && len(cfg.Sentinels) > 0 {
		cfg.MasterName = "lockproof"
	}
	if cfg.ProxyListenHost == "" {
		cfg.ProxyListenHost = "127.0.0.1"
	}
	if cfg.ProxyDialHost == "" {
		cfg.ProxyDialHost = u.Hostname()
	}
	e := &BYOEnv{cfg: cfg}
	e.srv = ProxyServer{API: toxiclient.NewClient(cfg.ToxiproxyURL), URL: cfg.ToxiproxyURL,
		ListenHost: cfg.ProxyListenHost, DialHost: cfg.ProxyDialHost}
	if _, err := e.srv.API.Proxies(); err != nil {
		return nil, fmt.Errorf("byo environment: toxiproxy %s: %w", RedactURL(cfg.ToxiproxyURL), err)
	}
	e.topo = Topology{MasterName: cfg.MasterName, Sentinels: cfg.Sentinels, Auth: cfg.Auth}
	data := cfg.Data
	if store := cfg.Topology(); contract.IsStore(store) {
		// A consensus store's members, reached through the clients' own
		// proxies (Links) as Redis nodes are.
		role, addrs := RoleEtcd, cfg.Etcd
		if store == contract.TopologyZooKeeper {
			role, addrs = RoleZooKeeper, cfg.ZooKeeper
		}
		e.topo.MasterName, e.topo.StoreKind = "", store
		for i, a := range addrs {
			e.topo.Store = append(e.topo.Store, Node{ID: NodeID(role, i), Role: role, Addr: a, Upstream: a})
		}
	} else if len(cfg.Cluster) > 0 {
		if e.topo.Cluster, err = DiscoverCluster(ctx, cfg.Auth, cfg.Cluster); err != nil {
			return nil, fmt.Errorf("byo environment: Cluster %v: %w", cfg.Cluster, err)
		}
		e.topo.MasterName = ""
		e.topo.NodeTimeout = nodeTimeout(ctx, cfg.Auth, e.topo.Cluster[0].Upstream)
	} else if len(data) == 0 {
		m, err := MasterAddr(ctx, e.topo)
		if err != nil {
			return nil, fmt.Errorf("byo environment: %w", err)
		}
		rs, err := Replicas(ctx, cfg.Auth, cfg.Sentinels[0], cfg.MasterName)
		if err != nil {
			return nil, fmt.Errorf("byo environment: %w", err)
		}
		data = []string{m}
		for a := range rs {
			data = append(data, a)
		}
	}
	for i, a := range data {
		e.topo.Data = append(e.topo.Data, Node{ID: NodeID(RoleData, i), Role: RoleData, Addr: a, Upstream: a})
	}
	e.topo.Fenced = Node{ID: NodeID(RoleFenced, 0), Role: RoleFenced, Addr: cfg.Fenced, Upstream: cfg.Fenced}
	for i, a := range cfg.Redlock {
		e.topo.Redlock = append(e.topo.Redlock, Node{ID: NodeID(RoleRedlock, i), Role: RoleRedlock, Addr: a, Upstream: a})
	}
	return e, nil
}

// nodeTimeout is the cluster-node-timeout of the node at addr, or
// Redis's default (15s) when CONFIG GET is refused, as managed services
// do.
func nodeTimeout(ctx context.Context, a Auth, addr string) time.Duration {
	c := AdminClient(a, addr)
	defer c.Close()
	if kv, err := c.ConfigGet(ctx, "cluster-node-timeout").Result(); err == nil {
		if ms, err := strconv.Atoi(kv["cluster-node-timeout"]); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return 15 * time.Second
}

// Topology is the deployment's topology name: contract.TopologyEtcd or
// contract.TopologyZooKeeper with a store's members,
// contract.TopologyCluster with Cluster seeds, else
// contract.TopologySentinel.
func (c BYOConfig) Topology() string {
	switch {
	case len(c.Etcd) > 0:
		return contract.TopologyEtcd
	case len(c.ZooKeeper) > 0:
		return contract.TopologyZooKeeper
	}
	if len(c.Cluster) > 0 {
		return contract.TopologyCluster
	}
	return contract.TopologySentinel
}

// ErrWrongTopology: a bring-your-own deployment is not of the topology
// asked for.
var ErrWrongTopology = errors.New("the deployment is not of the topology asked for")

// Fits reports whether the deployment is of spec's topology: a Redis
// Cluster's seeds (LOCKPROOF_CLUSTER) for the cluster topology, Sentinels
// or Data for the Sentinel one (ErrWrongTopology if not).
func (c BYOConfig) Fits(spec Spec) error {
	if got, want := c.Topology(), spec.Topology(); got != want {
		return fmt.Errorf("%w: the %s topology was asked for, and the deployment given is a %s one (the cluster topology takes LOCKPROOF_CLUSTER, BYOConfig.Cluster; the sentinel one LOCKPROOF_SENTINELS or LOCKPROOF_DATA; etcd LOCKPROOF_ETCD, BYOConfig.Etcd; zookeeper LOCKPROOF_ZOOKEEPER, BYOConfig.ZooKeeper)", ErrWrongTopology, want, got)
	}
	return nil
}

// Kind implements Env.
func (e *BYOEnv) Kind() Kind { return BYO }

// Topology implements Env.
func (e *BYOEnv) Topology() Topology { return e.topo }

// Proxies implements Env.
func (e *BYOEnv) Proxies() ProxyServer { return e.srv }

// Pause implements Env: unsupported.
func (e *BYOEnv) Pause(ctx context.Context, nodeID string) error {
	return fmt.Errorf("pause %s: %w", nodeID, ErrUnsupported)
}

// Resume implements Env: unsupported.
func (e *BYOEnv) Resume(ctx context.Context, nodeID string) error {
	return fmt.Errorf("resume %s: %w", nodeID, ErrUnsupported)
}

// Kill implements Env: unsupported.
func (e *BYOEnv) Kill(ctx context.Context, nodeID string) error {
	return fmt.Errorf("kill %s: %w", nodeID, ErrUnsupported)
}

// Restart implements Env: unsupported.
func (e *BYOEnv) Restart(ctx context.Context, nodeID string) error {
	return fmt.Errorf("restart %s: %w", nodeID, ErrUnsupported)
}

// Close implements Env. The deployment is not ours: nothing is stopped; the
// client proxies are deleted by their Links.
func (e *BYOEnv) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	return nil
}

// ToxiproxyAnswers says whether the deployment's Toxiproxy answers its
// API (GET /version within 5 s): an error naming its URL (redacted) and
// why not.
func (c BYOConfig) ToxiproxyAnswers(ctx context.Context) error {
	u, err := url.Parse(c.ToxiproxyURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("toxiproxy %s: want http://host:port", RedactURL(c.ToxiproxyURL))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.ToxiproxyURL, "/")+"/version", nil)
	if err != nil {
		return fmt.Errorf("toxiproxy %s: %v", RedactURL(c.ToxiproxyURL), err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its URL may hold the password
		}
		return fmt.Errorf("toxiproxy %s answering (ToxiproxyURL): %v", RedactURL(c.ToxiproxyURL), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("toxiproxy %s answering (ToxiproxyURL): GET /version: %s", RedactURL(c.ToxiproxyURL), resp.Status)
	}
	return nil
}

// BYOFromEnviron reads a BYOConfig from the environment variables
// LOCKPROOF_TOXIPROXY_URL, LOCKPROOF_PROXY_LISTEN_HOST, LOCKPROOF_PROXY_DIAL_HOST,
// LOCKPROOF_MASTER_NAME, LOCKPROOF_SENTINELS, LOCKPROOF_DATA, LOCKPROOF_CLUSTER,
// LOCKPROOF_ETCD, LOCKPROOF_ZOOKEEPER, LOCKPROOF_REDLOCK (comma-separated
// host:port lists) and LOCKPROOF_FENCED,
// and the login (AuthFromEnviron). It returns nil when
// LOCKPROOF_TOXIPROXY_URL is unset.
func BYOFromEnviron(getenv func(string) string) (*BYOConfig, error) {
	if getenv("LOCKPROOF_TOXIPROXY_URL") == "" {
		return nil, nil
	}
	auth, err := AuthFromEnviron(Auth{}, getenv)
	if err != nil {
		return nil, err
	}
	list := func(k string) []string {
		var out []string
		for _, s := range strings.Split(getenv(k), ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return &BYOConfig{
		ToxiproxyURL:    getenv("LOCKPROOF_TOXIPROXY_URL"),
		ProxyListenHost: getenv("LOCKPROOF_PROXY_LISTEN_HOST"),
		ProxyDialHost:   getenv("LOCKPROOF_PROXY_DIAL_HOST"),
		MasterName:      getenv("LOCKPROOF_MASTER_NAME"),
		Sentinels:       list("LOCKPROOF_SENTINELS"),
		Data:            list("LOCKPROOF_DATA"),
		Cluster:         list("LOCKPROOF_CLUSTER"),
		Etcd:            list("LOCKPROOF_ETCD"),
		ZooKeeper:       list("LOCKPROOF_ZOOKEEPER"),
		Redlock:         list("LOCKPROOF_REDLOCK"),
		Fenced:          getenv("LOCKPROOF_FENCED"),
		Auth:            auth,
	}, nil
}

// AuthFromEnviron is a with what the environment variables set:
// LOCKPROOF_REDIS_USERNAME, LOCKPROOF_REDIS_PASSWORD,
// LOCKPROOF_SENTINEL_USERNAME, LOCKPROOF_SENTINEL_PASSWORD,
// LOCKPROOF_REDIS_DB, and for TLS LOCKPROOF_REDIS_TLS (1 or true: speak
// TLS), LOCKPROOF_REDIS_TLS_CA, LOCKPROOF_REDIS_TLS_CERT,
// LOCKPROOF_REDIS_TLS_KEY, LOCKPROOF_REDIS_TLS_SERVER_NAME,
// LOCKPROOF_REDIS_TLS_INSECURE (1 or true); a consensus store's login
// LOCKPROOF_STORE_USERNAME, LOCKPROOF_STORE_PASSWORD, and its TLS
// LOCKPROOF_STORE_TLS, LOCKPROOF_STORE_TLS_CA, _CERT, _KEY,
// _SERVER_NAME, _INSECURE as the Redis ones. A variable that is set
// overrides a's field; one that is not leaves it. Passwords can so stay
// out of a config file (--byo-config), and out of a command line.
func AuthFromEnviron(a Auth, getenv func(string) string) (Auth, error) {
	str := func(k string, dst *string) {
		if v := getenv(k); v != "" {
			*dst = v
		}
	}
	secret := func(k string, dst *Secret) {
		if v := getenv(k); v != "" {
			*dst = Secret(v)
		}
	}
	str("LOCKPROOF_REDIS_USERNAME", &a.Username)
	secret("LOCKPROOF_REDIS_PASSWORD", &a.Password)
	str("LOCKPROOF_SENTINEL_USERNAME", &a.SentinelUsername)
	secret("LOCKPROOF_SENTINEL_PASSWORD", &a.SentinelPassword)
	if v := getenv("LOCKPROOF_REDIS_DB"); v != "" {
		db, err := strconv.Atoi(v)
		if err != nil || db < 0 {
			return a, fmt.Errorf("LOCKPROOF_REDIS_DB=%q: want a database number, 0 or more", v)
		}
		a.DB = db
	}
	str("LOCKPROOF_STORE_USERNAME", &a.StoreUsername)
	secret("LOCKPROOF_STORE_PASSWORD", &a.StorePassword)
	var err error
	if a.TLS, err = tlsFromEnviron("LOCKPROOF_REDIS_TLS", a.TLS, getenv); err != nil {
		return a, err
	}
	if a.StoreTLS, err = tlsFromEnviron("LOCKPROOF_STORE_TLS", a.StoreTLS, getenv); err != nil {
		return a, err
	}
	return a, nil
}

// tlsFromEnviron is t with what the variables named after v set: v (1
// or true: speak TLS; 0 or false: none), v_CA, v_CERT, v_KEY,
// v_SERVER_NAME, v_INSECURE (1 or true). Unset, they leave t.
func tlsFromEnviron(v string, t *TLS, getenv func(string) string) (*TLS, error) {
	boolean := func(k string) (bool, bool, error) {
		s := getenv(k)
		if s == "" {
			return false, false, nil
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			return false, false, fmt.Errorf("%s=%q: want 1, 0, true or false", k, s)
		}
		return b, true, nil
	}
	on, set, err := boolean(v)
	if err != nil {
		return t, err
	}
	insecure, insecureSet, err := boolean(v + "_INSECURE")
	if err != nil {
		return t, err
	}
	tlsVars := insecureSet
	for _, k := range []string{v + "_CA", v + "_CERT", v + "_KEY", v + "_SERVER_NAME"} {
		tlsVars = tlsVars || getenv(k) != ""
	}
	switch {
	case set && !on:
		if tlsVars {
			return t, fmt.Errorf("%s is off while other %s_* variables are set: turn it on, or unset them", v, v)
		}
		return nil, nil
	case !on && !tlsVars:
		return t, nil
	}
	out := TLS{}
	if t != nil {
		out = *t
	}
	for k, dst := range map[string]*string{v + "_CA": &out.CAFile, v + "_CERT": &out.CertFile, v + "_KEY": &out.KeyFile, v + "_SERVER_NAME": &out.ServerName} {
		if s := getenv(k); s != "" {
			*dst = s
		}
	}
	if insecureSet {
		out.InsecureSkipVerify = insecure
	}
	return &out, nil
}

// RedactURL is raw as it may be written anywhere (an error, a plan, a
// report): its password replaced by "xxxxx" (url.URL.Redacted), or a
// placeholder when raw does not parse as scheme://host, since the text
// might then hold one where Redacted does not look.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "(a URL that does not parse as scheme://host)"
	}
	return u.Redacted()
}
