"""A hostile HTTP server on 127.0.0.1 for the quality clients: it answers every request with
one fixed body, or drips bytes forever, or streams a huge body; it counts the bytes it sent."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Behaviour:
    body: bytes = b"{}"
    drip_s: float | None = None  # one byte each drip_s seconds, forever
    stream_bytes: int = 0  # this many bytes of "a" as one chunked body, no length given
    sent: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


def _handler(b: Behaviour) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: object) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            if b.drip_s is None and not b.stream_bytes:
                self.send_header("content-length", str(len(b.body)))
                self.end_headers()
                self.wfile.write(b.body)
                b.sent += len(b.body)
                return
            if b.stream_bytes:
                self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            with contextlib.suppress(OSError):
                self._slow() if b.drip_s is not None else self._stream()

        def _slow(self) -> None:
            while not b.stop.is_set():
                self.wfile.write(b" ")
                self.wfile.flush()
                b.sent += 1
                time.sleep(b.drip_s or 0)

        def _stream(self) -> None:
            chunk = b"a" * 65536
            left = b.stream_bytes
            while left > 0 and not b.stop.is_set():
                piece = chunk[:left]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                b.sent += len(piece)
                left -= len(piece)
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = _answer

    return Handler


@contextlib.contextmanager
def serving(b: Behaviour) -> Iterator[str]:
    """The base URL of a server that behaves as `b` says, stopped on leaving."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(b))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        b.stop.set()
        server.shutdown()
        server.server_close()
        thread.join()
