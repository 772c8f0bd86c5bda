# tcpdns.py NAME: one A query for NAME over TCP (RFC 7766: 2-byte length,
# then the message) to the first nameserver of /etc/resolv.conf; prints the
# answer's rcode and the last A record's address, or "fail" when nothing
# answers within 3 s. Run inside a sandbox by egress-dns.t.
import socket
import struct
import sys

ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
name = sys.argv[1]
q = struct.pack(">HHHHHH", 0x5B5B, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)


def read(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise OSError("closed")
        b += c
    return b


try:
    s = socket.create_connection((ns, 53), timeout=3)
    s.sendall(struct.pack(">H", len(q)) + q)
    m = read(s, struct.unpack(">H", read(s, 2))[0])
except OSError:
    print("fail")
    sys.exit(0)
ancount = struct.unpack(">H", m[6:8])[0]
ok_id = m[0:2] == q[0:2]
ip = ".".join(str(x) for x in m[-4:]) if ancount else ""
print(("%d %s" % (m[3] & 15, ip)).strip() if ok_id else "wrong id")
