"""A person in a browser who takes their time: waits SECONDS, then opens URL and
follows its redirects (plain GETs, no cookies) to the end — the client's loopback
redirect. Python stdlib only; loopback only.

Usage: slow_browser.py SECONDS URL
"""

import sys
import time
import urllib.request

if len(sys.argv) != 3:
    print(__doc__, file=sys.stderr)
    sys.exit(2)
time.sleep(float(sys.argv[1]))
with urllib.request.urlopen(sys.argv[2], timeout=60) as reply:
    reply.read()
