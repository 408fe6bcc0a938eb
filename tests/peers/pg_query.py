"""One SQL statement against the test PostgreSQL (tests/peers/postgres.sh: trust
authentication on loopback), for scripts that have no psql. Python stdlib only: the
simple-query protocol, text results.

Usage: pg_query.py postgres://USER@HOST:PORT/DB "SQL"

Prints each row as tab-separated values (NULL as an empty field), one per line.
Exits 1 with the server's message on an error. Refuses any authentication but trust.
"""

import socket
import struct
import sys
from urllib.parse import urlparse

LIMIT = 64 << 20  # bytes one message may claim (the server is ours, but bound it)


def read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def message(sock: socket.socket) -> tuple:
    kind, length = struct.unpack("!cI", read_exact(sock, 5))
    if length < 4 or length > LIMIT:
        raise ConnectionError(f"a message of {length} bytes")
    return kind, read_exact(sock, length - 4)


def error_text(body: bytes) -> str:
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[part[:1]] = part[1:].decode(errors="replace")
    return fields.get(b"M", "error")


def main() -> None:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    url = urlparse(sys.argv[1])
    user = url.username or "postgres"
    db = url.path.lstrip("/") or user
    sock = socket.create_connection((url.hostname or "127.0.0.1", url.port or 5432), timeout=60)
    params = f"user\0{user}\0database\0{db}\0\0".encode()
    sock.sendall(struct.pack("!II", 8 + len(params), 196608) + params)
    while True:
        kind, body = message(sock)
        if kind == b"R" and struct.unpack("!I", body[:4])[0] != 0:
            sys.exit("pg_query: the server asks for a password (only trust is supported)")
        if kind == b"E":
            sys.exit(f"pg_query: {error_text(body)}")
        if kind == b"Z":
            break
    sql = sys.argv[2].encode() + b"\0"
    sock.sendall(b"Q" + struct.pack("!I", 4 + len(sql)) + sql)
    failed = None
    out = []
    while True:
        kind, body = message(sock)
        if kind == b"D":
            (n,) = struct.unpack("!H", body[:2])
            at, row = 2, []
            for _ in range(n):
                (size,) = struct.unpack("!i", body[at:at + 4])
                at += 4
                if size < 0:
                    row.append("")
                else:
                    row.append(body[at:at + size].decode(errors="replace"))
                    at += size
            out.append("\t".join(row))
        elif kind == b"E":
            failed = error_text(body)
        elif kind == b"Z":
            break
    sock.sendall(b"X" + struct.pack("!I", 4))
    sock.close()
    if failed is not None:
        sys.exit(f"pg_query: {failed}")
    if out:
        print("\n".join(out))


if __name__ == "__main__":
    main()
