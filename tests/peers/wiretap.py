"""Starts a stdio server late and records its wire, for the era tests.

    wiretap.py LOG DELAY_SECONDS -- COMMAND [ARGS...]

Sleeps DELAY_SECONDS without reading anything (what the client writes meanwhile
waits in the pipe, as it would for a server that is slow to start), then runs
COMMAND and copies lines both ways, appending each to LOG as one JSON object per
line, in the order they pass: {"dir": ">", "line": ...} for client to server,
{"dir": "<", "line": ...} for server to client, and {"dir": "start"} first. A
line from the server is logged before the client can read it, and a line from the
client is logged before the server can, so LOG's order is an order both sides
could have seen: a request logged after a response was sent after that response
arrived. Standard library only.
"""

import json
import subprocess
import sys
import threading
import time


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: wiretap.py LOG DELAY_SECONDS -- COMMAND [ARGS...]")
    log_path, delay, argv = sys.argv[1], float(sys.argv[2]), sys.argv[4:]
    lock = threading.Lock()
    log = open(log_path, "a", encoding="utf-8")

    def record(direction, line=None):
        entry = {"dir": direction}
        if line is not None:
            entry["line"] = line.decode("utf-8", "replace").rstrip("\n")
        with lock:
            log.write(json.dumps(entry) + "\n")
            log.flush()

    record("start")
    time.sleep(delay)
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def to_server():
        try:
            for line in sys.stdin.buffer:
                record(">", line)
                child.stdin.write(line)
                child.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                child.stdin.close()
            except OSError:
                pass

    threading.Thread(target=to_server, daemon=True).start()
    out = sys.stdout.buffer
    try:
        for line in child.stdout:
            record("<", line)
            out.write(line)
            out.flush()
    except (BrokenPipeError, OSError):
        pass
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
