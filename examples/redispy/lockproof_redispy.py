#!/usr/bin/env python3
"""redis-py's Lock under lockproof, through the line protocol (docs/LINEPROTO.md, version 1).

    lockproof run --lock-cmd 'python3 examples/redispy/lockproof_redispy.py' \\
        --lock-name redis-py --profile lease

One process serves one workload client. Each request runs in a thread of its
own (a blocking acquire may wait while its owner releases another hold), and
every reply is one JSON line. redis-py's Lock is an unfenced lease: SET NX PX
to acquire, a token-checked Lua script to release, extend and reacquire; a
blocking acquire polls every 0.1s. It has no fence, no loss notice and no
reentry, and the hello reply says so.

redis-py tells its user nothing of how long a lock stays theirs, so the
adapter claims what a careful user reckons (hello "claims"): the TTL counted
from the moment the command that set it was sent (Redis starts the TTL later),
which TimedLock notes without changing what Lock does. The harness then holds
the claim true (the claims property).
"""
import json
import sys
import threading
import time

import redis
from redis.exceptions import ConnectionError, LockError, LockNotOwnedError, RedisError, TimeoutError
from redis.lock import Lock

OPS = ["acquire", "wait", "release", "renew"]
out = threading.Lock()


def send(msg):
    line = json.dumps(msg, separators=(",", ":")) + "\n"
    with out:
        sys.stdout.write(line)
        sys.stdout.flush()


class TimedLock(Lock):
    """redis-py's Lock, noting when the command that set the TTL was sent."""

    sent = None

    def do_acquire(self, token):
        self.sent = time.monotonic()
        return super().do_acquire(token)

    def do_extend(self, additional_time, replace_ttl):
        self.sent = time.monotonic()
        return super().do_extend(additional_time, replace_ttl)

    def do_reacquire(self):
        self.sent = time.monotonic()
        return super().do_reacquire()

    def valid_until(self, ttl):
        """Until when (time.monotonic) the lock is surely held: ttl from the send."""
        return self.sent + ttl


class Adapter:
    def __init__(self):
        self.r = None
        self.prefix = ""
        self.leases = {}
        self.next = 0
        self.mu = threading.Lock()

    def hello(self, m):
        rd = m["redis"]
        host, port = rd["addr"].rsplit(":", 1)
        # No retries: redis-py resends nothing, so a lost reply is an
        # unknown outcome the harness records as such.
        self.r = redis.Redis(host=host, port=int(port), db=rd.get("db", 0),
                             username=rd.get("username"), password=rd.get("password"),
                             socket_timeout=1.0, socket_connect_timeout=1.0, retry_on_timeout=False)
        self.prefix = m.get("prefix", "")
        return {"result": "ok", "version": 1, "lock": "redis-py " + redis.__version__, "ops": OPS, "claims": True}

    def acquire(self, m):
        lk = TimedLock(self.r, self.prefix + m["key"], timeout=m["ttl_ms"] / 1000, thread_local=False)
        if m.get("wait"):
            # Give up the wait in time to answer within the caller's deadline.
            t = m.get("timeout_ms")
            ok = lk.acquire(blocking=True, blocking_timeout=max(t / 1000 - 0.05, 0) if t else None)
        else:
            ok = lk.acquire(blocking=False)
        if not ok:
            return {"result": "fail"}
        with self.mu:
            self.next += 1
            lid = self.next
            self.leases[lid] = lk
        return {"result": "ok", "lease": lid, "valid_until": lk.valid_until(lk.timeout)}

    def lease(self, m):
        with self.mu:
            return self.leases.get(m["lease"])

    def release(self, m):
        with self.mu:
            lk = self.leases.pop(m["lease"], None)
        if lk is None:
            return {"result": "fail", "error": "released already"}
        lk.release()
        return {"result": "ok"}

    def renew(self, m):
        lk = self.lease(m)
        if lk is None:
            return {"result": "fail", "error": "released already"}
        ttl = m["ttl_ms"] / 1000
        # Both of redis-py's renewals are driven: reacquire resets the TTL
        # to the lock's timeout, so every other lease renews with it when
        # asked for exactly that; extend(replace_ttl=True) otherwise.
        if m["lease"] % 2 == 0 and abs(ttl - lk.timeout) < 1e-9:
            lk.reacquire()
        else:
            lk.extend(ttl, replace_ttl=True)
        return {"result": "ok", "valid_until": lk.valid_until(ttl)}

    def serve(self, m):
        start = time.monotonic()
        try:
            op = m["op"]
            if op == "hello":
                rep = self.hello(m)
            elif op == "ping":
                rep = {"result": "ok"}
            elif op == "close":
                self.r.close()
                rep = {"result": "ok"}
            elif op in ("acquire", "release", "renew"):
                rep = getattr(self, op)(m)
            else:
                rep = {"result": "unsupported"}
        except (LockNotOwnedError, LockError) as e:
            rep = {"result": "fail", "error": str(e)}
        except (ConnectionError, TimeoutError) as e:
            rep = {"result": "unknown", "error": type(e).__name__ + ": " + str(e)}
        except RedisError as e:  # an error reply: the command did nothing
            rep = {"result": "fail", "error": type(e).__name__ + ": " + str(e)}
        rep["id"] = m["id"]
        # valid_ms and took_us read one instant: the harness adds them, so
        # a claim taken earlier than took_us would stretch by the time
        # between the two (a stall of this process under load).
        now = time.monotonic()
        if "valid_until" in rep:
            rep["valid_ms"] = max(0, int((rep.pop("valid_until") - now) * 1000))
        rep["took_us"] = int((now - start) * 1e6)
        send(rep)


def main():
    a = Adapter()
    first = True
    for line in sys.stdin:
        m = json.loads(line)
        if first or m["op"] in ("ping", "close"):
            a.serve(m)  # hello runs before anything else needs the client
            first = False
        else:
            threading.Thread(target=a.serve, args=(m,), daemon=True).start()


if __name__ == "__main__":
    main()
