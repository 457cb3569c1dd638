"""Creating the result record through the API server: the runner's one API call.

Standard library only (``urllib`` and ``ssl``): the runner is copied into a Pod that
has nothing else, and the call is one POST. The address is the one the kubelet gives
every container for the ``kubernetes`` Service, the CA is the cluster's own bundle and
the credential is the Pod's bound token (``jobclaim.recordpod``): none of them comes
from anything the manager writes.

A create either lands or says why not, in one sentence the runner prints:

- 201: written;
- 409: a record of this Job exists, and is never changed: said as such (the Pod may
  not read records, so it cannot tell whether the record is its own earlier create);
- 4xx: refused by the API server (admission's sentence is passed on), never retried;
- 5xx, 429 and transport errors: retried with a doubling pause for a bounded time, then
  given up; the termination summary is then the only account the Pod leaves.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from jobclaim import RECORD_CA_FILE, RECORD_TOKEN_DIR, RECORD_TOKEN_FILE
from jobclaim.api import GROUP, VERSION
from runner.errors import RecordUnwritten

RECORDS_PATH: Final = "/apis/{group}/{version}/namespaces/{namespace}/ptahresultrecords"
RETRY_SECONDS: Final = 30.0
FIRST_PAUSE: Final = 0.5
REQUEST_TIMEOUT: Final = 10.0
MAX_ANSWER_BYTES: Final = 64 * 1024
MAX_REASON: Final = 1024


class Recorder(Protocol):
    def create(self, record: Mapping[str, Any]) -> None:
        """Create ``record``; ``RecordUnwritten`` with one sentence when it was not."""


def _reason(body: bytes, status: int) -> str:
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        message = None
    text = " ".join(str(message or body[:MAX_REASON].decode("utf-8", "replace")).split())
    return f"HTTP {status}: {text[:MAX_REASON]}" if text else f"HTTP {status}"


@dataclass
class ApiRecorder:
    """Creates records at ``base_url`` as the Pod whose token is at ``token_path``."""

    base_url: str
    token_path: Path
    ca_path: Path
    retry_seconds: float = RETRY_SECONDS
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    _context: ssl.SSLContext | None = field(default=None, init=False, repr=False)

    def _ssl(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = ssl.create_default_context(cafile=str(self.ca_path))
        return self._context

    def _send(self, method: str, url: str, body: bytes | None) -> tuple[int, bytes]:
        token = self.token_path.read_text().strip()
        request = urllib.request.Request(url, data=body, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(
                request, timeout=REQUEST_TIMEOUT, context=self._ssl()
            ) as answer:
                return int(answer.status), answer.read(MAX_ANSWER_BYTES)
        except urllib.error.HTTPError as error:
            return int(error.code), error.read(MAX_ANSWER_BYTES)

    def create(self, record: Mapping[str, Any]) -> None:
        namespace = record["metadata"]["namespace"]
        url = self.base_url + RECORDS_PATH.format(group=GROUP, version=VERSION, namespace=namespace)
        body = json.dumps(record, separators=(",", ":")).encode("ascii")
        give_up = self.clock() + self.retry_seconds
        pause = FIRST_PAUSE
        while True:
            try:
                status, answer = self._send("POST", url, body)
            except (OSError, ssl.SSLError) as error:
                # OSError covers URLError, timeouts and a token file that cannot be read.
                status, answer = 0, str(getattr(error, "reason", error)).encode()
            if status == 201:
                return
            if status == 409:
                # Only this Job's Pod may create its record, but the Pod may not read
                # records (they hold other Jobs' SQL), so it cannot tell its own earlier
                # create, whose answer was lost, from an earlier Job's of the name. The
                # manager reads whichever it is, and holds it to this Job's UID.
                raise RecordUnwritten(
                    "a record of this Job already exists (an earlier create of this Pod's, "
                    "or an earlier Job's of the same name); this Pod may not read it"
                )
            retryable = status in {0, 429} or status >= 500
            reason = _reason(answer, status) if status else answer.decode("utf-8", "replace")
            if not retryable:
                raise RecordUnwritten(f"the API server refused the record: {reason}")
            if self.clock() + pause > give_up:
                raise RecordUnwritten(f"the API server could not be reached in time: {reason}")
            self.sleep(pause)  # a backoff between retries, not a synchronization
            pause *= 2


def api_recorder(env: Mapping[str, str]) -> ApiRecorder | str:
    """The recorder for this Pod, or why it has none (not running in a Pod)."""
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        return "the kubelet gave no API server address (KUBERNETES_SERVICE_HOST/PORT unset)"
    if ":" in host:
        host = f"[{host}]"
    directory = Path(RECORD_TOKEN_DIR)
    return ApiRecorder(
        f"https://{host}:{port}",
        token_path=directory / RECORD_TOKEN_FILE,
        ca_path=directory / RECORD_CA_FILE,
    )
