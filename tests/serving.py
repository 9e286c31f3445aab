"""A server of ours on a free port of 127.0.0.1, inside the test process, and a plain HTTP client."""

from __future__ import annotations

import http.client
import json
import threading
import time

from mt.serve.app import create_app
from mt.serve.limits import ServeLimits


class RunningServer:
    def __init__(
        self, translator, limits: ServeLimits | None = None, max_wait: float = 0.005, workers: int = 1, glossary=None,
        cors_origins=(),
    ):  # fmt: skip
        import uvicorn

        app = create_app(translator, limits or ServeLimits(), {"engine": "torch", "device": "cpu", "model": "test"},
                         max_wait, workers, glossary, cors_origins)  # fmt: skip
        self.batcher = app.state.batcher
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    def request(self, method: str, path: str, body: bytes | str | dict | None = None) -> tuple[int, dict | str]:
        """(status, the JSON answer, or the text of an HTML one)."""
        if isinstance(body, dict):
            body = json.dumps(body)
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8")
            kind = response.getheader("Content-Type", "")
            return response.status, json.loads(text) if kind.startswith("application/json") else text
        finally:
            connection.close()

    def headers(self, method: str, path: str, headers: dict, body: str | None = None) -> tuple[int, dict]:
        """(status, the answer's headers, names lowercased) of a request with these headers."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            return response.status, {name.lower(): value for name, value in response.getheaders()}
        finally:
            connection.close()

    def document(self, path: str, body: bytes, kind: str = "application/xliff+xml", text: bool = True):
        """(status, the answer's text (bytes: text False), its headers, names lowercased) of a POST of a
        document (of media type kind)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            connection.request("POST", path, body=body, headers={"Content-Type": kind})
            response = connection.getresponse()
            answer = response.read()
            answer = answer.decode("utf-8") if text else answer
            return response.status, answer, {name.lower(): value for name, value in response.getheaders()}
        finally:
            connection.close()

    def translate(self, body) -> tuple[int, dict]:
        return self.request("POST", "/translate", body)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
