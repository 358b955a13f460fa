// Package etcdproc starts and stops a real etcd cluster as local processes
// (Debian's etcd-server), each member on reserved loopback ports in a
// temporary directory of its own, for the consensus-store environments of
// issue 45. It is the process layer only, as redisproc is for Redis: what a
// member advertises to its peers and clients is its caller's choice
// (ClusterConfig.Advertise), so that a chaos environment can put a
// Toxiproxy proxy in front of every link.
//
// It speaks to the members through etcd's JSON gateway (POST /v3/...) on
// their own client ports, so that the library's module needs no etcd
// client: the client library (go.etcd.io/etcd/client/v3, gRPC and its
// dependencies) belongs with the locks that use it, in a module of their
// own, as testcontainers does (a user's module lists at most 40 modules).
//
// Isolating a member takes a blackhole, not a refused connection. etcd's
// peers exchange raft messages over streams each member dials to the other
// (a member's messages to a peer flow on the connection that peer dialed to
// it) and fall back to a pipeline of POSTs to the peer's own address when a
// stream breaks. A member whose one inbound peer proxy refuses or resets
// connections keeps sending through the pipeline to its peers' proxies: its
// leadership holds and its writes commit (docs/FINDINGS.md, "Measurements
// behind the code"). A proxy that accepts the
// bytes and drops them (Toxiproxy's timeout toxic with timeout 0 on both
// streams, as etcd's own functional tester blackholes a member's peer
// port) leaves the streams up, so no fallback happens: the other members
// elect a new leader within an election timeout, and the old one commits
// nothing (TestBlackholeIsolatesTheLeader).
package etcdproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockproof/lockproof/internal/proc"
)

// ErrNotInstalled is returned when the etcd binary is not on PATH.
var ErrNotInstalled = errors.New("etcd not found on PATH (Debian: apt-get install etcd-server)")

// ErrNoLeader is returned when the members that answer do not agree on
// one leader.
var ErrNoLeader = errors.New("no leader the members agree on")

// ClusterConfig says how to start a cluster. Zero fields take the defaults
// named.
type ClusterConfig struct {
	// Members is the cluster's size; default 3.
	Members int
	// Advertise returns the peer and client addresses (host:port) member i
	// announces, given the ones it listens on: a proxy's in front of
	// each, or the same addresses. nil announces the listen addresses.
	Advertise func(i int, peer, client string) (advPeer, advClient string, err error)
	// HeartbeatInterval and ElectionTimeout are etcd's; defaults 100ms
	// and 1s (etcd's own).
	HeartbeatInterval, ElectionTimeout time.Duration
	// StartTimeout bounds the wait for a leader; default 30s.
	StartTimeout time.Duration
	// BcryptCost is etcd's --bcrypt-cost, the work factor of its users'
	// password hashes; 0: etcd's default (10). Every Authenticate checks
	// a password against its hash (tens of milliseconds at 10), and a
	// client re-authenticates when its token goes stale: at 10, five
	// clients of a lock churning on three members made half the
	// requests they made without authentication. MinCost, 4, for a
	// password that is a random 128-bit secret, which no work factor
	// needs to slow the guessing of.
	BcryptCost int
	// AuthTokenTTL is etcd's --auth-token-ttl, how long a simple token
	// lives unused; 0: etcd's default (300s). A test shortens it to see
	// a client's token go stale while it holds.
	AuthTokenTTL time.Duration
	// ClientTLS, when set, makes every member serve its clients over TLS
	// only (https client URLs): a deployment of a user's that asks it.
	ClientTLS *ClientTLS
}

// ClientTLS is how a cluster's members speak TLS to their clients.
type ClientTLS struct {
	// CertFile and KeyFile are the members' certificate and key (PEM).
	// With CAFile set, the certificate must serve as a client's too:
	// etcd's JSON gateway dials the member's own gRPC with it.
	CertFile, KeyFile string
	// CAFile, when set, is the authority whose client certificates the
	// members ask of every client (--client-cert-auth).
	CAFile string
	// Client is how the cluster's own requests (its status, EnableAuth,
	// Wipe's) speak TLS to the members: the authority of CertFile, and a
	// client certificate when CAFile asks one.
	Client *tls.Config
}

// Member is one running (or killed) etcd member: proc.Member's Launch
// (a restart, on its data and ports), Kill, Pause, Resume and Running act
// on its process.
type Member struct {
	// Name is "m0", "m1", ...
	Name string
	// PeerAddr and ClientAddr are the addresses it listens on.
	PeerAddr, ClientAddr string
	// AdvPeer and AdvClient are the addresses it announces.
	AdvPeer, AdvClient string
	// Dir holds its data directory and log.
	Dir string

	proc.Member
	args []string // its command line's arguments (Wipe changes them)
}

// Cluster is a running etcd cluster.
type Cluster struct {
	// Members in the order of ClusterConfig's indexes.
	Members []*Member

	ens  *proc.Ensemble
	http *http.Client
	// scheme is the members' client URLs' scheme: http, or https with
	// ClientTLS.
	scheme string
	// login is the user the cluster's own requests authenticate as once
	// EnableAuth turned authentication on; the zero login before.
	login Login
}

// Login is an etcd user's name and password. Password is never
// formatted into an error or a log.
type Login struct {
	User, Password string
}

// Binary returns the path of etcd, or ErrNotInstalled.
func Binary() (string, error) {
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", ErrNotInstalled
	}
	return p, nil
}

// StartCluster starts cfg.Members members and waits, within ctx and
// cfg.StartTimeout, until every one answers and they agree on a leader.
// On an error every process started is stopped.
func StartCluster(ctx context.Context, cfg ClusterConfig) (c *Cluster, err error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if cfg.Members <= 0 {
		cfg.Members = 3
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 100 * time.Millisecond
	}
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	ens, err := proc.NewEnsemble("lockproof-etcd-*")
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	root := ens.Root
	c = &Cluster{ens: ens, http: &http.Client{Timeout: 5 * time.Second}, scheme: "http"}
	var tlsArgs []string
	if t := cfg.ClientTLS; t != nil {
		c.scheme = "https"
		c.http.Transport = &http.Transport{TLSClientConfig: t.Client}
		tlsArgs = []string{"--cert-file", t.CertFile, "--key-file", t.KeyFile}
		if t.CAFile != "" {
			tlsArgs = append(tlsArgs, "--client-cert-auth", "--trusted-ca-file", t.CAFile)
		}
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	var initial []string
	for i := range cfg.Members {
		m := &Member{Name: "m" + strconv.Itoa(i), Dir: filepath.Join(root, "m"+strconv.Itoa(i))}
		m.Member.Name, m.Log = "etcd "+m.Name, filepath.Join(m.Dir, "etcd.log")
		c.Members = append(c.Members, m)
		c.ens.Add(&m.Member)
		for _, addr := range []*string{&m.PeerAddr, &m.ClientAddr} {
			port, release, err := proc.ReservePort(0)
			if err != nil {
				return c, err
			}
			m.Hold(release)
			*addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		}
		m.AdvPeer, m.AdvClient = m.PeerAddr, m.ClientAddr
		if cfg.Advertise != nil {
			if m.AdvPeer, m.AdvClient, err = cfg.Advertise(i, m.PeerAddr, m.ClientAddr); err != nil {
				return c, fmt.Errorf("start etcd: advertise %s: %w", m.Name, err)
			}
		}
		initial = append(initial, m.Name+"=http://"+m.AdvPeer)
	}
	for _, m := range c.Members {
		args := []string{"--name", m.Name, "--data-dir", filepath.Join(m.Dir, "data"),
			"--listen-peer-urls", "http://" + m.PeerAddr, "--initial-advertise-peer-urls", "http://" + m.AdvPeer,
			"--listen-client-urls", c.scheme + "://" + m.ClientAddr, "--advertise-client-urls", c.scheme + "://" + m.AdvClient,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			// A token of its own: a member of another test's cluster on a
			// reused port is refused, not joined.
			"--initial-cluster-token", filepath.Base(root),
			"--heartbeat-interval", strconv.FormatInt(cfg.HeartbeatInterval.Milliseconds(), 10),
			"--election-timeout", strconv.FormatInt(cfg.ElectionTimeout.Milliseconds(), 10),
			// A member replaced (Wipe) is added back at once: the strict
			// check refuses any change until every member has been
			// connected for 5s, which a member just killed never is.
			"--strict-reconfig-check=false"}
		args = append(args, tlsArgs...)
		if cfg.BcryptCost > 0 {
			args = append(args, "--bcrypt-cost", strconv.Itoa(cfg.BcryptCost))
		}
		if cfg.AuthTokenTTL > 0 {
			args = append(args, "--auth-token-ttl", strconv.Itoa(int(cfg.AuthTokenTTL/time.Second)))
		}
		m.Command = func() *exec.Cmd { return exec.Command(bin, args...) }
		m.args = args
		if err := os.MkdirAll(m.Dir, 0o700); err != nil {
			return c, fmt.Errorf("start etcd %s: %w", m.Name, err)
		}
		if err := m.Launch(); err != nil {
			return c, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if _, err := c.WaitLeader(wctx, nil); err != nil {
		return c, fmt.Errorf("start etcd: %w; %s", err, c.ens.Tails())
	}
	return c, nil
}

// Stop kills every member, gives up their ports and removes their
// directories. It is safe to call more than once.
func (c *Cluster) Stop() error { return c.ens.Stop() }

// Status is what a member says of the cluster (its maintenance status).
type Status struct {
	// Member is its own ID, Leader the leader's (0: none known).
	Member, Leader uint64
	// Term is its raft term.
	Term uint64
}

// Status asks member i, on its own client port.
func (c *Cluster) Status(ctx context.Context, i int) (Status, error) {
	return StatusAt(ctx, c.http, c.url(i))
}

// url is member i's client URL (scheme and address), which StatusAt,
// Token and the gateway's requests take for an address.
func (c *Cluster) url(i int) string { return c.scheme + "://" + c.Members[i].ClientAddr }

// WaitLeader waits until the members that run and are not in skip answer
// and agree on a leader among them, and returns its index.
func (c *Cluster) WaitLeader(ctx context.Context, skip []int) (int, error) {
	i, err := proc.Await(ctx, 50*time.Millisecond, func(ctx context.Context) (int, error) { return c.leader(ctx, skip) })
	if err != nil {
		return -1, fmt.Errorf("%w: %w", ErrNoLeader, err)
	}
	return i, nil
}

func (c *Cluster) leader(ctx context.Context, skip []int) (int, error) {
	addrs := make([]string, len(c.Members))
	for i, m := range c.Members {
		if m.Running() && !slices.Contains(skip, i) {
			addrs[i] = c.url(i)
		}
	}
	return LeaderAmong(ctx, c.http, addrs)
}

// StatusAt asks the member whose client port is addr (its JSON gateway;
// an addr with no scheme is http's).
func StatusAt(ctx context.Context, hc *http.Client, addr string) (Status, error) {
	var r struct {
		Header struct {
			MemberID uint64 `json:"member_id,string"`
		} `json:"header"`
		Leader   uint64 `json:"leader,string"`
		RaftTerm uint64 `json:"raftTerm,string"`
	}
	if err := postTo(ctx, hc, addr, "/v3/maintenance/status", struct{}{}, &r); err != nil {
		return Status{}, err
	}
	return Status{Member: r.Header.MemberID, Leader: r.Leader, Term: r.RaftTerm}, nil
}

// LeaderAmong asks the members at addrs ("" for one not to ask) and
// returns the index of the leader they all name, or an error wrapping
// ErrNoLeader.
func LeaderAmong(ctx context.Context, hc *http.Client, addrs []string) (int, error) {
	ids := map[uint64]int{}
	leaders := map[uint64]bool{}
	for i, a := range addrs {
		if a == "" {
			continue
		}
		st, err := StatusAt(ctx, hc, a)
		if err != nil {
			return -1, fmt.Errorf("%s: %w", a, err)
		}
		ids[st.Member] = i
		leaders[st.Leader] = true
	}
	if len(leaders) != 1 {
		return -1, fmt.Errorf("%w: leaders %v", ErrNoLeader, leaders)
	}
	for l := range leaders {
		if i, ok := ids[l]; ok && l != 0 {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: the leader is not among the members asked", ErrNoLeader)
}

// Wipe gives member i, killed, back to the cluster as a member with no
// data: it is removed from the cluster (through a member that runs), its
// data directory deleted, added again as a new member under its name and
// addresses, and started to join the running cluster (etcd's way to
// replace a member that lost its disk: a member that comes back empty
// under its old identity would be refused).
func (c *Cluster) Wipe(ctx context.Context, i int) error {
	m := c.Members[i]
	if m.Running() {
		return fmt.Errorf("wipe %s: still running (kill it first)", m.Name)
	}
	via := -1
	for j, o := range c.Members {
		if j != i && o.Running() {
			via = j
			break
		}
	}
	if via < 0 {
		return fmt.Errorf("wipe %s: no other member runs", m.Name)
	}
	var list struct {
		Members []struct {
			ID   uint64 `json:"ID,string"`
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := c.post(ctx, via, "/v3/cluster/member/list", struct{}{}, &list); err != nil {
		return fmt.Errorf("wipe %s: %w", m.Name, err)
	}
	for _, o := range list.Members {
		if o.Name == m.Name {
			var out struct{}
			if err := c.post(ctx, via, "/v3/cluster/member/remove", map[string]string{"ID": strconv.FormatUint(o.ID, 10)}, &out); err != nil {
				return fmt.Errorf("wipe %s: remove: %w", m.Name, err)
			}
		}
	}
	var out struct{}
	if err := c.post(ctx, via, "/v3/cluster/member/add", map[string][]string{"peerURLs": {"http://" + m.AdvPeer}}, &out); err != nil {
		return fmt.Errorf("wipe %s: add: %w", m.Name, err)
	}
	if err := os.RemoveAll(filepath.Join(m.Dir, "data")); err != nil {
		return fmt.Errorf("wipe %s: %w", m.Name, err)
	}
	args := slices.Clone(m.args)
	for k := range args {
		if args[k] == "--initial-cluster-state" {
			args[k+1] = "existing"
		}
	}
	bin := m.Command().Path
	m.args = args
	m.Command = func() *exec.Cmd { return exec.Command(bin, args...) }
	return m.Launch()
}

// Put writes key = value through member i (a linearizable write: it
// commits only with a quorum), and returns the revision it made.
func (c *Cluster) Put(ctx context.Context, i int, key, value string) (int64, error) {
	var r struct {
		Header struct {
			Revision int64 `json:"revision,string"`
		} `json:"header"`
	}
	body := map[string][]byte{"key": []byte(key), "value": []byte(value)}
	if err := c.post(ctx, i, "/v3/kv/put", body, &r); err != nil {
		return 0, err
	}
	return r.Header.Revision, nil
}

// EnableAuth turns etcd's authentication on, through member i: it adds
// the user root with password and the role root, grants it, and enables
// authentication. From then on every request of a client without a
// login is refused ("user name is empty"), and the cluster's own
// requests (Wipe's, Put's) authenticate as root. etcd wants its root
// user to exist before it enables authentication: root is the one user.
func (c *Cluster) EnableAuth(ctx context.Context, i int, password string) error {
	if err := EnableAuthAt(ctx, c.http, c.url(i), password); err != nil {
		return fmt.Errorf("%s: %w", c.Members[i].Name, err)
	}
	c.login = Login{User: "root", Password: password}
	return nil
}

// EnableAuthAt is EnableAuth through the member whose client port is
// addr, for a cluster this package did not start (a container's).
func EnableAuthAt(ctx context.Context, hc *http.Client, addr, password string) error {
	var out struct{}
	steps := []struct {
		path string
		body any
	}{
		{"/v3/auth/user/add", map[string]string{"name": "root", "password": password}},
		{"/v3/auth/role/add", map[string]string{"name": "root"}},
		{"/v3/auth/user/grant", map[string]string{"user": "root", "role": "root"}},
		{"/v3/auth/enable", struct{}{}},
	}
	for _, s := range steps {
		if err := postTo(ctx, hc, addr, s.path, s.body, &out); err != nil {
			return fmt.Errorf("enable auth: %w", err)
		}
	}
	return nil
}

// Token authenticates login at the member whose client port is addr and
// returns the token its later requests carry (header Authorization).
// etcd's simple tokens are applied through Raft, so every member knows
// them, until it restarts or the token idles for 5 minutes: take one per
// use.
func Token(ctx context.Context, hc *http.Client, addr string, login Login) (string, error) {
	var r struct {
		Token string `json:"token"`
	}
	if err := postAs(ctx, hc, addr, "", "/v3/auth/authenticate", map[string]string{"name": login.User, "password": login.Password}, &r); err != nil {
		return "", fmt.Errorf("authenticate as %s: %w", login.User, err)
	}
	return r.Token, nil
}

// post sends a JSON request to member i's gateway and decodes its answer,
// authenticated once EnableAuth turned authentication on.
func (c *Cluster) post(ctx context.Context, i int, path string, in, out any) error {
	addr := c.url(i)
	token := ""
	if c.login.User != "" {
		t, err := Token(ctx, c.http, addr, c.login)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Members[i].Name, err)
		}
		token = t
	}
	if err := postAs(ctx, c.http, addr, token, path, in, out); err != nil {
		return fmt.Errorf("%s: %w", c.Members[i].Name, err)
	}
	return nil
}

// postTo sends a JSON request to the gateway of the member at addr and
// decodes its answer.
func postTo(ctx context.Context, hc *http.Client, addr, path string, in, out any) error {
	return postAs(ctx, hc, addr, "", path, in, out)
}

// postAs is postTo carrying token ("" for none).
func postAs(ctx context.Context, hc *http.Client, addr, token, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	base := addr
	if !strings.Contains(addr, "://") {
		base = "http://" + addr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
