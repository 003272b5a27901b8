"""The image's HEALTHCHECK: the agent's card answers on the port its command line gives (else 9009)."""

import sys
import urllib.request
from pathlib import Path

args = Path("/proc/1/cmdline").read_bytes().decode(errors="replace").split("\0")
port = "9009"
for index, arg in enumerate(args):
    if arg == "--port" and index + 1 < len(args):
        port = args[index + 1]
    elif arg.startswith("--port="):
        port = arg.split("=", 1)[1]
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=8) as reply:
        sys.exit(0 if reply.status == 200 else 1)
except OSError as error:
    print(f"card on port {port}: {error}")
    sys.exit(1)
