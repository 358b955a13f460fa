package lineproto

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// forwarder is the one Redis endpoint a lock's process is given: a
// loopback listener whose every connection is dialled anew through the
// client's go-redis dialer. For a Sentinel deployment that dialer asks
// the Sentinels for the master, so a process that knows nothing of
// Sentinel follows failovers as it would behind a proxy that tracks them;
// and it goes through the client's own Toxiproxy links, so partitions and
// latency reach the process as they reach a Go client. TLS, when the
// deployment has it, ends here: the process speaks plain RESP on loopback.
//
// The endpoint admits only the process it was made for: a connection's
// first command must log in with the endpoint's own password (secret, new
// for each process, handed to it in hello), with AUTH or HELLO ... AUTH,
// as any Redis client does with a password; anything else is refused
// (NOAUTH, WRONGPASS) and the connection closed before anything is dialled
// upstream. The endpoint logs in to the deployment itself, with the
// harness's credentials, which the process never sees: another local
// process that finds the port (it is in /proc/net/tcp) cannot reach the
// deployment through it, nor borrow the harness's TLS client certificate.
type forwarder struct {
	ln     net.Listener
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	addr   string
	to     time.Duration
	secret string
	// user and pass log in upstream ("" pass: the deployment asks none).
	user, pass string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
	wg    sync.WaitGroup
}

// newForwarder serves rdb's endpoint on loopback. Only a single-endpoint
// client (a master, or a Sentinel failover client) has one: a Redis
// Cluster is many, which protocol versions 1 and 2 do not hand a process.
func newForwarder(rdb redis.UniversalClient) (*forwarder, *redis.Options, error) {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return nil, nil, fmt.Errorf("Deps.Redis is a %T: a lock's own process is handed one Redis endpoint (a master or a Sentinel deployment's), not a Redis Cluster's", rdb)
	}
	opt := c.Options()
	dial := opt.Dialer
	if dial == nil {
		d := &net.Dialer{Timeout: opt.DialTimeout}
		dial = d.DialContext
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("listen for the lock process: %w", err)
	}
	to := opt.DialTimeout
	if to <= 0 {
		to = 5 * time.Second
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		_ = ln.Close()
		return nil, nil, fmt.Errorf("the lock process's password: %w", err)
	}
	f := &forwarder{ln: ln, dial: dial, addr: opt.Addr, to: to, secret: hex.EncodeToString(b),
		user: opt.Username, pass: opt.Password, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, opt, nil
}

// Addr is the endpoint's address.
func (f *forwarder) Addr() string { return f.ln.Addr().String() }

// Password is what the process logs in to the endpoint with.
func (f *forwarder) Password() string { return f.secret }

func (f *forwarder) serve() {
	defer f.wg.Done()
	var backoff time.Duration
	for {
		c, err := f.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors (EMFILE), say, while connections that
			// never log in pile up: not the endpoint's end. Back off and
			// accept again, as net/http does, or the process would lose
			// its Redis for good.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if !f.track(c) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// pipe joins one connection of the process to a fresh one upstream. A
// reply -READONLY (the master it reached was demoted by a failover) is
// passed on and then the connection is cut, as redis-py's and go-redis's
// own Sentinel clients cut theirs: the process's next connection goes to
// the new master.
func (f *forwarder) pipe(down net.Conn) {
	defer f.wg.Done()
	defer f.untrack(down)
	r := bufio.NewReaderSize(down, 4096)
	// As Redis does, a refused command is answered and the connection
	// stays, so that a client may log in next (go-redis tries HELLO, then
	// AUTH); a few refusals, a malformed command or the dial timeout end
	// it.
	_ = down.SetReadDeadline(time.Now().Add(f.to))
	var first []byte
	for tries := 1; ; tries++ {
		var refusal string
		var err error
		first, refusal, err = f.login(r)
		if refusal == "" {
			break
		}
		if _, werr := down.Write([]byte(refusal)); werr != nil || err != nil || tries == maxLoginTries {
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.to)
	up, err := f.dial(ctx, "tcp", f.addr)
	cancel()
	if err != nil {
		f.refuseRest(r, down, "-ERR lockproof's endpoint could not reach Redis: "+oneLine(err.Error())+"\r\n")
		return
	}
	if !f.track(up) {
		_ = up.Close()
		return
	}
	defer f.untrack(up)
	if err := f.loginUpstream(up); err != nil {
		f.refuseRest(r, down, "-ERR lockproof's endpoint could not log in to Redis: "+oneLine(err.Error())+"\r\n")
		return
	}
	_ = down.SetReadDeadline(time.Time{})
	if first == nil {
		// The process logged in with AUTH: its OK is the endpoint's.
		if _, err := down.Write([]byte("+OK\r\n")); err != nil {
			return
		}
	} else if _, err := up.Write(first); err != nil {
		return // HELLO, its AUTH taken off: Redis answers it
	}
	go func() {
		_, _ = io.Copy(up, r)
		_ = up.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if _, werr := down.Write(buf[:n]); werr != nil {
				return
			}
			if readOnly(buf[:n]) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readOnly reports whether b holds a -READONLY error reply.
func readOnly(b []byte) bool {
	return bytes.HasPrefix(b, []byte("-READONLY")) || bytes.Contains(b, []byte("\r\n-READONLY"))
}

// Close stops the endpoint and cuts every connection through it.
func (f *forwarder) Close() error {
	f.mu.Lock()
	f.done = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	err := f.ln.Close()
	f.wg.Wait()
	return err
}

// The replies of a refused login, as Redis words them.
const (
	replyNoAuth    = "-NOAUTH Authentication required.\r\n"
	replyWrongPass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
)

// maxLogin bounds a command before the login (a login is a few short
// arguments), and maxLoginTries the commands refused before it.
const (
	maxLogin      = 4096
	maxLoginTries = 8
)

// login reads the first command of a connection and checks that it logs
// in with the endpoint's password: AUTH [user] password (first is nil:
// the endpoint answers it), or HELLO protover AUTH user password [...]
// (first is that HELLO without its AUTH, to send upstream, whose reply
// the process reads). The user, when given, must be "default": hello
// hands the process no other. refusal is the reply to a command that
// did not log in, "" when the login holds; err says the connection
// cannot go on (a command that is no RESP array, too long, or cut).
func (f *forwarder) login(r *bufio.Reader) (first []byte, refusal string, err error) {
	args, err := readCommand(r, maxLogin)
	if err != nil || len(args) == 0 {
		return nil, replyNoAuth, cmp.Or(err, errors.New("empty command"))
	}
	ok := func(user, pass string) bool {
		good := subtle.ConstantTimeCompare([]byte(pass), []byte(f.secret)) == 1
		return good && (user == "" || user == "default")
	}
	switch strings.ToUpper(args[0]) {
	case "AUTH":
		switch {
		case len(args) == 2 && ok("", args[1]), len(args) == 3 && ok(args[1], args[2]):
			return nil, "", nil
		case len(args) == 2 || len(args) == 3:
			return nil, replyWrongPass, nil
		}
		return nil, replyNoAuth, nil
	case "HELLO":
		keep := []string{"HELLO"}
		authed := false
		for i := 1; i < len(args); i++ {
			if strings.EqualFold(args[i], "AUTH") && i+2 < len(args) {
				if !ok(args[i+1], args[i+2]) {
					return nil, replyWrongPass, nil
				}
				authed = true
				i += 2
				continue
			}
			keep = append(keep, args[i])
		}
		if !authed {
			return nil, replyNoAuth, nil
		}
		return encodeCommand(keep), "", nil
	}
	return nil, replyNoAuth, nil
}

// refuseRest answers the process's login and the commands after it with
// reply (a dial or a login upstream that failed), as Redis answers a
// client it cannot serve, up to maxLoginTries commands within the read
// deadline: a client that tries AUTH after a refused HELLO (go-redis)
// hears why, not a closed connection.
func (f *forwarder) refuseRest(r *bufio.Reader, down net.Conn, reply string) {
	for range maxLoginTries {
		if _, err := down.Write([]byte(reply)); err != nil {
			return
		}
		if _, err := readCommand(r, maxLogin); err != nil {
			return
		}
	}
}

// loginUpstream logs in to the deployment on up with the harness's own
// credentials, when it asks for them.
func (f *forwarder) loginUpstream(up net.Conn) error {
	if f.pass == "" {
		return nil
	}
	args := []string{"AUTH", f.pass}
	if f.user != "" {
		args = []string{"AUTH", f.user, f.pass}
	}
	_ = up.SetDeadline(time.Now().Add(f.to))
	defer func() { _ = up.SetDeadline(time.Time{}) }()
	if _, err := up.Write(encodeCommand(args)); err != nil {
		return err
	}
	line, err := bufio.NewReaderSize(up, 512).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+") {
		return errors.New(strings.TrimSpace(line))
	}
	return nil
}

// readCommand reads one RESP command (an array of bulk strings) of at
// most max bytes from r.
func readCommand(r *bufio.Reader, max int) ([]string, error) {
	n, err := readHeader(r, '*', 64)
	if err != nil {
		return nil, err
	}
	args := make([]string, 0, n)
	total := 0
	for range n {
		k, err := readHeader(r, '$', max)
		if err != nil {
			return nil, err
		}
		if total += k; total > max {
			return nil, errors.New("command too long")
		}
		b := make([]byte, k+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		if !bytes.HasSuffix(b, []byte("\r\n")) {
			return nil, errors.New("bulk string not ended by CRLF")
		}
		args = append(args, string(b[:k]))
	}
	return args, nil
}

// readHeader reads a RESP header line "<typ><n>\r\n" with 0 <= n <= max.
func readHeader(r *bufio.Reader, typ byte, max int) (int, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 4 || line[0] != typ || line[len(line)-2] != '\r' {
		return 0, fmt.Errorf("want a %q header", typ)
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("header %q out of range", line)
	}
	return n, nil
}

// encodeCommand is args as a RESP command.
func encodeCommand(args []string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// oneLine is s with its line breaks made spaces (an error reply is one
// line).
func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
