"""The host's side of the sbx-init channel handshake (protocol v3,
src/lib/frame.h and chanauth.h), for tests that speak raw frames: connect()
returns a socket on which sbx-init has proved it holds the key, ready for
requests. The key and sandbox id come from SBX_CHANNEL_KEY / SBX_SANDBOX_ID
unless given. BLAKE2b keyed (hashlib) is libsodium's crypto_generichash."""
import hashlib, os, socket, struct

VERSION = 3
HELLO, AUTH, AUTH_OK = 0x87, 0x0B, 0x8A
PING, EXEC, STATUS, PONG, STATUS_R = 0x01, 0x02, 0x0C, 0x81, 0x8B


def mac(key, role, nonce, sid):
    data = b"sbx-chan3 " + role.encode() + b"\0" + nonce + sid.encode()
    return hashlib.blake2b(data, digest_size=32, key=key).digest()


def frame(t, stream, payload=b""):
    return struct.pack(">IBI", len(payload) + 5, t, stream) + payload


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("channel closed")
        b += c
    return b


def read_frame(s):
    ln, t, st = struct.unpack(">IBI", recv_exact(s, 9))
    return t, st, recv_exact(s, ln - 5)


def handshake(s, key=None, sid=None):
    key = bytes.fromhex(key or os.environ["SBX_CHANNEL_KEY"])
    sid = sid or os.environ["SBX_SANDBOX_ID"]
    t, st, p = read_frame(s)
    if t != HELLO or st != 0 or len(p) != 20 or struct.unpack(">I", p[:4])[0] != VERSION:
        raise ValueError("not a v3 HELLO")
    nonce_n = os.urandom(16)
    s.sendall(frame(AUTH, 0, nonce_n + mac(key, "node", p[4:], sid)))
    t, st, p = read_frame(s)
    if t != AUTH_OK or p != mac(key, "init", nonce_n, sid):
        raise ValueError("sbx-init did not prove the key")
    return s


def connect(path, key=None, sid=None, timeout=5):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(path)
    return handshake(s, key, sid)


def serve_handshake(c, key, sid):
    """sbx-init's side, for tests that stand in for it: HELLO, check AUTH,
    AUTH_OK. Raises when the host does not prove the key."""
    key = bytes.fromhex(key)
    nonce_i = os.urandom(16)
    c.sendall(frame(HELLO, 0, struct.pack(">I", VERSION) + nonce_i))
    t, st, p = read_frame(c)
    if t != AUTH or len(p) != 48 or p[16:] != mac(key, "node", nonce_i, sid):
        raise ValueError("the host did not prove the key")
    c.sendall(frame(AUTH_OK, 0, mac(key, "init", p[:16], sid)))
    return c


def serve_until_exec(c):
    """A stand-in's wait for the EXEC it is there for. The node agent may
    speak first on its own: a liveness PING, or the idle pass's STATUS
    before it freezes a quiet sandbox (2 s after its last operation by
    default); each is answered as sbx-init would, STATUS with one process
    running, so that the sandbox is not frozen under the test. Returns the
    EXEC's stream and payload."""
    while True:
        t, st, p = read_frame(c)
        if t == EXEC:
            return st, p
        if t == PING:
            c.sendall(frame(PONG, st, p))
        elif t == STATUS:
            c.sendall(frame(STATUS_R, 0, struct.pack(">I", 1)))
