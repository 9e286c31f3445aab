"""Just enough of the W3C WebDriver protocol (what chromedriver speaks over HTTP) to drive headless
Chromium through a page: open it, type, click, read text, take a screenshot."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference
# Headless, and quiet on a machine without a network: no background fetches, sync or update checks.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1100,640",
]


def find_browser() -> tuple[str, str] | None:
    """(chromium, chromedriver) paths, or None where either is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


class Browser:
    def __init__(self, chromium: str, driver: str):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.driver = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}"
        self.profile = tempfile.mkdtemp(prefix="mt-browser-")
        for _ in range(100):
            try:
                self._call("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        options = {"binary": chromium, "args": [*CHROMIUM_FLAGS, f"--user-data-dir={self.profile}"]}
        capabilities = {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}
        self.session = self._call("POST", "/session", {"capabilities": capabilities})["sessionId"]

    def _call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["value"]

    def _session(self, method: str, path: str, body: dict | None = None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def open(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    def find(self, css: str) -> str:
        return self._session("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def exists(self, css: str) -> bool:
        """Whether the page holds an element css selects."""
        return bool(self._session("POST", "/elements", {"using": "css selector", "value": css}))

    def type(self, css: str, text: str) -> None:
        self._session("POST", f"/element/{self.find(css)}/value", {"text": text})

    def value(self, css: str) -> str:
        """An input's current value."""
        return self._session("GET", f"/element/{self.find(css)}/property/value")

    def clear(self, css: str) -> None:
        self._session("POST", f"/element/{self.find(css)}/clear", {})

    def click(self, css: str) -> None:
        self._session("POST", f"/element/{self.find(css)}/click", {})

    def text(self, css: str) -> str:
        return self._session("GET", f"/element/{self.find(css)}/text")

    def wait_for_text(self, css: str, timeout: float = 60, containing: str = "") -> str:
        """The element's text once it is not empty (and holds `containing`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.text(css)
            if text.strip() and containing in text:
                return text
            time.sleep(0.1)
        raise TimeoutError(
            f"{css} stayed without {containing!r} for {timeout:.0f} s"
            if containing
            else f"{css} stayed empty for {timeout:.0f} s"
        )

    def run_async(self, script: str):
        """What script passes to its callback (the last of `arguments`), run in the page."""
        return self._session("POST", "/execute/async", {"script": script, "args": []})

    def screenshot(self) -> bytes:
        return base64.b64decode(self._session("GET", "/screenshot"))

    def close(self) -> None:
        try:
            self._session("DELETE", "")
        finally:
            self.driver.terminate()
            self.driver.wait(timeout=30)
            shutil.rmtree(self.profile, ignore_errors=True)
