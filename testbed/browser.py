"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for the report page tests.

One websocket to the browser; a page target attached in flat mode, so every
command names its session. Console messages and uncaught exceptions are kept.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--remote-debugging-port=0", "--remote-allow-origins=*"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """A headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout: float = 60.0) -> None:
        self.width, self.height, self.timeout = width, height, timeout
        self.console: list[dict[str, Any]] = []
        self.exceptions: list[dict[str, Any]] = []
        self.requests: list[str] = []
        self._ids = itertools.count(1)

    def __enter__(self) -> Browser:
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        path = chromium_path()
        assert path, "chromium is not installed (make test installs it: apt-get install chromium)"
        self._process = subprocess.Popen(
            [path, *FLAGS, f"--user-data-dir={self._profile.name}", f"--window-size={self.width},{self.height}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = self._devtools_url()
        self._socket = connect(url, max_size=None, open_timeout=self.timeout)
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable", session=True)
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._socket.close()
        finally:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._profile.cleanup()

    def _devtools_url(self) -> str:
        assert self._process.stderr is not None
        lines = []
        for line in self._process.stderr:
            lines.append(line)
            match = re.search(r"DevTools listening on (ws://\S+)", line)
            if match:
                return match.group(1)
        raise AssertionError(f"chromium exited before its DevTools endpoint was up: {''.join(lines)[-2000:]}")

    def send(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer, keeping the events that arrive meanwhile."""
        message_id = next(self._ids)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self._socket.send(json.dumps(message))
        while True:
            reply = json.loads(self._socket.recv(timeout=self.timeout))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _event(self, event: dict[str, Any]) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            self.console.append({"type": params.get("type"),
                                 "text": " ".join(str(a.get("value", a.get("description"))) for a in params["args"])})
        elif method == "Log.entryAdded":
            self.console.append({"type": params["entry"]["level"], "text": params["entry"]["text"]})
        elif method == "Runtime.exceptionThrown":
            self.exceptions.append(params["exceptionDetails"])
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> None:
        """Load `url`; the console, exceptions and requests kept from then on are this page's."""
        self.console.clear()
        self.exceptions.clear()
        self.requests.clear()
        self.send("Page.navigate", session=True, url=url)
        self.wait_for("document.readyState === 'complete'")

    def wait_for(self, expression: str, timeout: float | None = None) -> None:
        """Poll until the expression is truthy in the page."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expression}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the element (scrolled into view first)."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
            "e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", session=True, type=kind, x=box[0], y=box[1], button="left",
                      clickCount=1)

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        data = self.send("Page.captureScreenshot", session=True, **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
