package zkproc

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The few requests of ZooKeeper's client protocol (jute over TCP, each
// frame behind its length) that an environment needs of its own servers:
// a session, a digest login, the root's ACL, a node's children. The
// library's module has no ZooKeeper client (the package doc says why);
// these are a hundred lines.
const (
	opAuth        = 100
	opSetACL      = 7
	opGetChildren = 8
	xidAuth       = -4

	// PermAll is every permission of an ACL (read, write, create, delete,
	// admin).
	PermAll = 0x1f
)

// ErrRefused: the server refused the request (it closed the connection,
// as it does to a client that did not log in when it enforces
// authentication, or answered with an error: NoAuth, -102, when the
// node's ACL does not admit the identity).
var ErrRefused = errors.New("refused by the ZooKeeper server")

// Digest is ZooKeeper's digest identity of user with password: the id of
// an ACL entry of scheme digest, user:base64(sha1(user:password)).
func Digest(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// LockRoot gives the root node "/" an ACL that admits the digest
// identity of user alone, logged in as it at the server at addr: a
// client of another identity can then create, read or delete nothing
// under it (the nodes made later carry their own ACLs: the lock's admit
// the same identity). A server that enforces authentication still lets
// any digest login in; the ACLs are what keeps it out.
func LockRoot(ctx context.Context, addr, user, password string) error {
	s, err := dialSession(ctx, addr, user, password)
	if err != nil {
		return fmt.Errorf("lock the root of %s: %w", addr, err)
	}
	defer s.Close()
	var b bytes.Buffer
	putString(&b, "/")
	putInt(&b, 1) // one ACL entry
	putInt(&b, PermAll)
	putString(&b, "digest")
	putString(&b, Digest(user, password))
	putInt(&b, -1) // any version
	if _, err := s.call(1, opSetACL, b.Bytes()); err != nil {
		return fmt.Errorf("lock the root of %s: setACL: %w", addr, err)
	}
	return nil
}

// Children returns the children of path at the server at addr, logged
// in as user with password (user "": no login). ErrRefused says the
// server would not.
func Children(ctx context.Context, addr, user, password, path string) ([]string, error) {
	s, err := dialSession(ctx, addr, user, password)
	if err != nil {
		return nil, fmt.Errorf("children of %s at %s: %w", path, addr, err)
	}
	defer s.Close()
	var b bytes.Buffer
	putString(&b, path)
	b.WriteByte(0) // no watch
	body, err := s.call(1, opGetChildren, b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("children of %s at %s: %w", path, addr, err)
	}
	r := bytes.NewReader(body)
	var n int32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return nil, fmt.Errorf("children of %s at %s: %w", path, addr, err)
	}
	out := make([]string, 0, max(n, 0))
	for range n {
		c, err := getString(r)
		if err != nil {
			return nil, fmt.Errorf("children of %s at %s: %w", path, addr, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// session is one connection with a session on it.
type session struct{ net.Conn }

// dialSession opens a session at the server at addr, within ctx (and
// 10s), and logs in as user with password when user is set.
func dialSession(ctx context.Context, addr, user, password string) (*session, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	s := &session{conn}
	var b bytes.Buffer
	putInt(&b, 0)     // protocol version
	putLong(&b, 0)    // last zxid seen
	putInt(&b, 10000) // session timeout, ms
	putLong(&b, 0)    // session id: a new one
	putBuffer(&b, make([]byte, 16))
	if err := s.send(b.Bytes()); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if _, err := s.frame(); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: no session: %w", ErrRefused, err)
	}
	if user == "" {
		return s, nil
	}
	b.Reset()
	putInt(&b, 0) // auth type
	putString(&b, "digest")
	// The password goes to the server and nowhere else: no error below
	// quotes the request.
	putBuffer(&b, []byte(user+":"+password))
	if _, err := s.call(xidAuth, opAuth, b.Bytes()); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("digest login as %s: %w", user, err)
	}
	return s, nil
}

// call sends request op with xid and body and returns its reply's body,
// or an error wrapping ErrRefused when the server answered with an error
// code or closed the connection.
func (s *session) call(xid, op int32, body []byte) ([]byte, error) {
	var b bytes.Buffer
	putInt(&b, xid)
	putInt(&b, op)
	b.Write(body)
	if err := s.send(b.Bytes()); err != nil {
		return nil, err
	}
	for {
		f, err := s.frame()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRefused, err)
		}
		if len(f) < 16 {
			return nil, fmt.Errorf("short reply (%d bytes)", len(f))
		}
		rxid := int32(binary.BigEndian.Uint32(f))
		code := int32(binary.BigEndian.Uint32(f[12:]))
		if rxid != xid && code == 0 {
			continue // a notification or a ping's reply
		}
		if code != 0 {
			return nil, fmt.Errorf("%w: error code %d", ErrRefused, code)
		}
		return f[16:], nil
	}
}

// send writes one frame: its length, then b.
func (s *session) send(b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	_, err := s.Write(append(n[:], b...))
	return err
}

// frame reads one frame (at most 1MiB).
func (s *session) frame() ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(s, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", size)
	}
	f := make([]byte, size)
	_, err := io.ReadFull(s, f)
	return f, err
}

func putInt(b *bytes.Buffer, v int32) {
	_ = binary.Write(b, binary.BigEndian, v)
}

func putLong(b *bytes.Buffer, v int64) {
	_ = binary.Write(b, binary.BigEndian, v)
}

func putBuffer(b *bytes.Buffer, v []byte) {
	putInt(b, int32(len(v)))
	b.Write(v)
}

func putString(b *bytes.Buffer, v string) { putBuffer(b, []byte(v)) }

func getString(r *bytes.Reader) (string, error) {
	var n int32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return "", err
	}
	if n < 0 || int64(n) > int64(r.Len()) {
		return "", fmt.Errorf("string of %d bytes", n)
	}
	v := make([]byte, n)
	_, err := io.ReadFull(r, v)
	return string(v), err
}
