#!/usr/bin/python3
# A fake Redis for pressure-adapt's hostile-server tests: enough of RESP for the adapter's handshake and
# shrinker, and then what a hostile server might send. Usage: fake-resp.py MODE ADDRESS (a Unix socket
# path, or 127.0.0.1:PORT with PORT 0 for any: the port is printed). Modes:
#   honest   process_id is its own pid
#   liar     process_id is 1 (root's init)
#   bigping  honest, but each PING is answered with a 3 MiB bulk string
#   deep     honest, but each PING is answered with nested arrays of 1,024 elements
#   slow     honest, but what a shrinker's request sends (INFO memory, CONFIG SET, MEMORY PURGE) is
#            answered after 450 ms each: four of them take twice the daemon's 1 s deadline
import os, socket, sys, threading, time

mode, address = sys.argv[1], sys.argv[2]

def reply_for(cmd):
    name = cmd[0].upper() if cmd else b""
    if mode == "slow" and (name in (b"MEMORY", b"CONFIG") and cmd[1].upper() != b"GET" or
                           name == b"INFO" and cmd[1:] == [b"memory"]):
        time.sleep(0.45)
    if name == b"CONFIG" and len(cmd) >= 3 and cmd[1].upper() == b"GET":
        value = b"allkeys-lru" if cmd[2] == b"maxmemory-policy" else b"0"
        return b"*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(cmd[2]), cmd[2], len(value), value)
    if name == b"INFO":
        pid = 1 if mode == "liar" else os.getpid()
        body = b"# Server\r\nprocess_id:%d\r\nused_memory:%d\r\n" % (pid, 64 << 20)
        return b"$%d\r\n%s\r\n" % (len(body), body)
    if name == b"PING":
        if mode == "bigping":
            body = b"x" * (3 << 20)
            return b"$%d\r\n%s\r\n" % (len(body), body)
        if mode == "deep":
            return b"*1024\r\n" * 4 + b":1\r\n" * 4096
        return b"+PONG\r\n"
    return b"+OK\r\n"

def parse(buf):
    """One command (an array of bulk strings) from buf: (args, rest) or (None, buf)."""
    if not buf.startswith(b"*") or b"\r\n" not in buf:
        return None, buf
    head, rest = buf.split(b"\r\n", 1)
    args = []
    for _ in range(int(head[1:])):
        if b"\r\n" not in rest:
            return None, buf
        h, rest2 = rest.split(b"\r\n", 1)
        n = int(h[1:])
        if len(rest2) < n + 2:
            return None, buf
        args.append(rest2[:n])
        rest = rest2[n + 2:]
    return args, rest

def serve(conn):
    buf = b""
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
            while True:
                cmd, buf = parse(buf)
                if cmd is None:
                    break
                conn.sendall(reply_for(cmd))
    except OSError:
        pass
    finally:
        conn.close()

if address.startswith("/"):
    s = socket.socket(socket.AF_UNIX)
    s.bind(address)
    os.chmod(address, 0o666)
else:
    host, port = address.rsplit(":", 1)
    s = socket.socket(socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    print(s.getsockname()[1], flush=True)
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
