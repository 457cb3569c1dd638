"""The imperative shell around the rules: decode, drive the reads, map every ending.

A rule yields the keys it needs and the engine reads them through the ``ApiReader``
(uncached; several keys of one batch concurrently), sends the answers back, and takes
the rule's Decision. Every way a request can end is mapped here and nowhere else:

    admitted                       200, allowed
    refused by a rule              200, not allowed, status 403 and the sentence
    malformed review or object     HTTP 400
    a read failed                  HTTP 500 (the API server then fails closed)
    anything else (a defect)       HTTP 500

Only a rule that *returned* an allowing Decision allows. An exception anywhere, the
reader's included, ends in one of the refusing rows, so no path answers "allowed"
after something went wrong.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

import anyio

from jobclaim.apiserver import ApiReader, NotFound, Resource
from webhook.controllerwrite import judge_controller_write
from webhook.decisions import judge_decision_write, judge_stamp
from webhook.managerstate import judge_manager_state
from webhook.objects import DEFECT, READ_FAILED, READS
from webhook.records import judge_record_write
from webhook.review import AdmissionRequest, parse_review, response
from webhook.rules import (
    CONTROLLER_WRITE,
    DECISIONS,
    MANAGER_STATE,
    RECORDS,
    STAMP,
    Decision,
    Denied,
    Endpoint,
    Fetched,
    Judgement,
    Malformed,
    Object,
    ReadFailed,
    ReadKey,
    Settings,
    Stored,
)


@runtime_checkable
class TextReader(Protocol):
    """A reader that can also hand over an object as the JSON text the API server sent.

    Decoding a model straight from that text skips building a tree only to validate
    it, on every read of every request. ``get_text`` makes the request ``get`` makes
    and raises exactly what it raises; for every answer an API server gives (one JSON
    object that carries its ``apiVersion`` and ``kind``) the text decodes to exactly
    what ``get`` returns. An answer that is not such an object is where the two part:
    ``get`` raises, while ``get_text`` may hand it over unchecked, since checking would
    take the parse it exists to spare. Its consumer must therefore fail closed on any
    text, as ``Stored`` does: text that is not JSON, or JSON that is not one object,
    fails the read (500). The text must be what a JSON encoder writes (the API
    server's, or orjson's for a ``StateReader``): the model's parser would also read a
    ``NaN``, an ``Infinity`` or an integer beyond 64 bits, which no encoder writes and
    which ``get`` would have failed or read as a float.
    """

    def get_text(self, resource: Resource, namespace: str | None, name: str) -> bytes: ...


JUDGES: Final[Mapping[str, Callable[[AdmissionRequest, Settings], Judgement]]] = {
    CONTROLLER_WRITE: judge_controller_write,
    MANAGER_STATE: judge_manager_state,
    STAMP: judge_stamp,
    DECISIONS: judge_decision_write,
    RECORDS: judge_record_write,
}
# A schema Apply reads at most 16 projections in one batch.
MAX_CONCURRENT_READS: Final = 16


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request's ending: the decision and enough of the request to log it."""

    decision: Decision
    uid: str
    request: AdmissionRequest | None

    @property
    def http_status(self) -> int:
        # A refusal is a well-formed answer; only malformed requests and failures are
        # HTTP errors, which the API server treats as a failed call.
        return 200 if self.decision.code in (200, 403) else self.decision.code

    def body(self) -> Object:
        d = self.decision
        return response(self.uid, allowed=d.allowed, code=d.code, message=d.message, patch=d.patch)


class Engine:
    """Judges reviews for one endpoint set, reading through one uncached reader."""

    def __init__(
        self,
        reader: ApiReader,
        settings: Settings | None = None,
        *,
        blocking_reads: bool = True,
    ) -> None:
        """``blocking_reads=False`` declares a reader that answers from memory (the
        in-memory double, a state file): ``decide_async`` then reads on the loop instead
        of handing each batch to a worker thread."""
        self.reader = reader
        self._text_reader = reader if isinstance(reader, TextReader) else None
        self.settings = settings or Settings()
        self.blocking_reads = blocking_reads
        self._pool: ThreadPoolExecutor | None = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def decide(self, endpoint: Endpoint, body: bytes) -> Outcome:
        """Judge one raw review body posted to ``endpoint``."""
        try:
            review = parse_review(body)
        except Malformed as malformed:
            decision = Decision(False, 400, malformed.rule, malformed.message)
            return Outcome(decision, malformed.uid, None)
        except Exception as error:  # a defect in decoding: still never "allowed"
            return Outcome(_defect(error), "", None)
        request = review.request
        return Outcome(self.judge(endpoint, request), request.uid, request)

    def judge(self, endpoint: Endpoint, request: AdmissionRequest) -> Decision:
        """Run the endpoint's rule for a decoded request to its Decision."""
        try:
            judgement = JUDGES[endpoint](request, self.settings)
            return run(judgement, self.read)
        except Exception as error:
            return _defect(error)

    async def decide_async(self, endpoint: Endpoint, body: bytes) -> Outcome:
        """``decide`` for an event loop: the rule runs on the loop, reads in a thread.

        Judging is CPU work under the GIL either way; running it on the loop spares
        every request two thread switches, and only the reads, which block on the API
        server, leave the loop.
        """
        try:
            review = parse_review(body)
        except Malformed as malformed:
            decision = Decision(False, 400, malformed.rule, malformed.message)
            return Outcome(decision, malformed.uid, None)
        except Exception as error:
            return Outcome(_defect(error), "", None)
        request = review.request
        try:
            judgement = JUDGES[endpoint](request, self.settings)
            decision = await run_async(judgement, self._read_in_thread)
        except Exception as error:
            decision = _defect(error)
        return Outcome(decision, request.uid, request)

    async def _read_in_thread(self, keys: Iterable[ReadKey]) -> Fetched:
        if not self.blocking_reads:
            return self.read(keys)
        return await anyio.to_thread.run_sync(self.read, tuple(keys))

    def read(self, keys: Iterable[ReadKey]) -> Fetched:
        """Read each key directly; None for NotFound, ``ReadFailed`` for anything else."""
        unique = list(dict.fromkeys(keys))
        if len(unique) <= 1:
            return {key: self._read_one(key) for key in unique}
        if self._pool is None:
            self._pool = ThreadPoolExecutor(MAX_CONCURRENT_READS, thread_name_prefix="webhook-read")
        return dict(zip(unique, self._pool.map(self._read_one, unique), strict=True))

    def _read_one(self, key: ReadKey) -> Stored | None:
        try:
            if key.selector:
                items = self.reader.list(
                    key.resource, key.namespace, label_selector=dict(key.selector)
                )
                return Stored(key, tree={"items": items})
            # A cluster-scoped object (a PtahRealm, a Namespace) is read with no
            # namespace at all: the adapter refuses one given, even an empty one.
            namespace = key.namespace if key.resource.namespaced else None
            if self._text_reader is not None:
                text = self._text_reader.get_text(key.resource, namespace, key.name)
                return Stored(key, text=text)
            return Stored(key, tree=self.reader.get(key.resource, namespace, key.name))
        except NotFound:
            return None
        except Exception as error:
            # Every failure of the reader counts: a client bug that raised something
            # other than ApiError has still not told us what the API server holds.
            raise ReadFailed(key, error) from error


def run(judgement: Judgement, read: Callable[[Iterable[ReadKey]], Fetched]) -> Decision:
    """Drive one rule to its Decision, sending it what ``read`` answers for each batch."""
    try:
        keys = next(judgement)
        while True:
            fetched = read(keys)
            keys = judgement.send(fetched)
    except StopIteration as done:
        return _allowing(done.value)
    except (Denied, Malformed, ReadFailed) as ended:
        return _ended(judgement, ended)


async def run_async(
    judgement: Judgement, read: Callable[[Iterable[ReadKey]], Awaitable[Fetched]]
) -> Decision:
    """``run`` with an awaitable ``read``; every ending is mapped the same way."""
    try:
        keys = next(judgement)
        while True:
            fetched = await read(keys)
            keys = judgement.send(fetched)
    except StopIteration as done:
        return _allowing(done.value)
    except (Denied, Malformed, ReadFailed) as ended:
        return _ended(judgement, ended)


def _ended(judgement: Judgement, ended: Denied | Malformed | ReadFailed) -> Decision:
    """The refusal a rule that stopped early owes; one mapping for both drivers, so the
    synchronous and the asynchronous path can never answer one ending differently."""
    if isinstance(ended, Denied):
        return ended.decision
    if isinstance(ended, Malformed):
        return Decision(False, 400, ended.rule, ended.message)
    judgement.close()
    message = READ_FAILED.sentence(key=ended.key, error=_describe(ended.error))
    return Decision(False, 500, READS.id, message)


def _allowing(decision: object) -> Decision:
    if not isinstance(decision, Decision) or (decision.allowed and decision.code != 200):
        raise TypeError(f"a rule ended with {decision!r}, which is not an allowing Decision")
    return decision


def _describe(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text[:1].lower() + text[1:]


def _defect(error: BaseException) -> Decision:
    return Decision(False, 500, READS.id, DEFECT.sentence(error=_describe(error)))
