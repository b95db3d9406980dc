"""A minimal Hugging Face Hub on 127.0.0.1 for download tests: the endpoints huggingface_hub's
``snapshot_download`` calls for one dataset repository at one commit (revision info, recursive
tree listing, HEAD/GET ``resolve`` with range requests), with faults to inject."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


class Hub:
    """Serves the files under ``root`` as dataset ``repo`` at commit ``commit``.

    ``cut[path] = n``: the next full GET of ``path`` sends ``n`` bytes, then drops the
    connection. ``broken``: GETs of these paths answer 500. ``requests`` logs
    ``(method, path, range header)``.
    """

    def __init__(self, root: Path, repo: str, commit: str):
        self.root, self.repo, self.commit = root, repo, commit
        self.cut: dict[str, int] = {}
        self.broken: set[str] = set()
        self.requests: list[tuple[str, str, str | None]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def files(self) -> list[str]:
        return sorted(
            p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()
        )

    def gets(self, path: str) -> list[str | None]:
        return [r for m, p, r in self.requests if m == "GET" and p == path]

    def __enter__(self) -> Hub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    api = re.compile(rf"^/api/datasets/{re.escape(hub.repo)}/(revision|tree)/([^/]+)(?:/(.*))?$")
    resolve = re.compile(rf"^/datasets/{re.escape(hub.repo)}/resolve/([^/]+)/(.+)$")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _json(self, body: object, status: int = 200, error: str | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if error:
                self.send_header("X-Error-Code", error)
            self.end_headers()
            self.wfile.write(data)

        def _known(self, rev: str) -> bool:
            if rev in (hub.commit, "main"):
                return True
            self._json({"error": f"Invalid rev id: {rev}"}, 404, "RevisionNotFound")
            return False

        def do_GET(self) -> None:
            self._serve(head=False)

        def do_HEAD(self) -> None:
            self._serve(head=True)

        def _serve(self, head: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            m = api.match(path)
            if m and not head:
                if not self._known(m.group(2)):
                    return
                entries = [
                    {"type": "file", "path": f, "size": (hub.root / f).stat().st_size,
                     "oid": hashlib.sha1((hub.root / f).read_bytes()).hexdigest()}
                    for f in hub.files()
                ]  # fmt: skip
                if m.group(1) == "revision":
                    siblings = [{"rfilename": e["path"]} for e in entries]
                    self._json({"id": hub.repo, "sha": hub.commit, "siblings": siblings})
                else:
                    self._json(entries)
                return
            m = resolve.match(path)
            if not m:
                self._json({"error": "not found"}, 404, "EntryNotFound")
                return
            if not self._known(m.group(1)):
                return
            self._file(m.group(2), head)

        def _file(self, name: str, head: bool) -> None:
            file = hub.root / name
            rng = self.headers.get("Range")
            with hub.lock:
                hub.requests.append(("HEAD" if head else "GET", name, rng))
            if not file.is_file():
                self._json({"error": "not found"}, 404, "EntryNotFound")
                return
            if not head and name in hub.broken:
                self._json({"error": "server error"}, 500)
                return
            data = file.read_bytes()
            start = int(re.match(r"bytes=(\d+)-", rng).group(1)) if rng else 0
            self.send_response(206 if rng else 200)
            self.send_header("X-Repo-Commit", hub.commit)
            self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
            self.send_header("Content-Length", str(len(data) - start))
            if rng:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if head:
                return
            cut = None if rng else hub.cut.pop(name, None)
            if cut is None:
                self.wfile.write(data[start:])
                return
            self.wfile.write(data[:cut])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    return Handler
