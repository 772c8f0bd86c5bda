#!/usr/bin/env python3
"""A tiny authoritative DNS server for the egress tests (run in a test
host's network namespace): answers A queries from a JSON zone file
{"name": ["A.B.C.D", ...]} read at every query (so a test changes records by
rewriting it), with a TTL of 2 s; NXDOMAIN for other names, no data for
other types. Each query's name is appended to the log file. A zone's
"_slow": {"name": MS} answers that name MS milliseconds late (a resolver
far away; other queries are answered meanwhile).
usage: dnsserver.py ADDR PORT ZONE_FILE LOG_FILE"""
import json
import socket
import struct
import sys
import threading

addr, port, zone_file, log_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, port))
while True:
    q, peer = s.recvfrom(1500)
    if len(q) < 12:
        continue
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    off, labels = 12, []
    try:
        while q[off]:
            n = q[off]
            labels.append(q[off + 1:off + 1 + n].decode().lower())
            off += 1 + n
        off += 1
        qtype, qclass = struct.unpack("!HH", q[off:off + 4])
    except (IndexError, struct.error, UnicodeDecodeError):
        continue
    name = ".".join(labels)
    with open(log_file, "a") as f:
        f.write(name + "\n")
    try:
        with open(zone_file) as f:
            zone = json.load(f)
    except (OSError, ValueError):
        zone = {}
    question = q[12:off + 4]
    answers = b""
    rcode = 0
    if name not in zone:
        rcode = 3
    elif qtype == 1:
        for a in zone[name]:
            answers += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 2, 4) + socket.inet_aton(a)
    n = len(answers) // 16
    hdr = struct.pack("!HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, n, 0, 0)
    slow = zone.get("_slow", {})
    if isinstance(slow, dict) and isinstance(slow.get(name), int):
        threading.Timer(slow[name] / 1000, s.sendto, (hdr + question + answers, peer)).start()
    else:
        s.sendto(hdr + question + answers, peer)
