"""``get_text``: the webhook's read of an object as the text the API server sent.

The webhook decodes its models straight from that text (``webhook.engine.TextReader``),
so the text must decode to exactly the object ``get`` returns, for a custom resource
and a built-in alike, and a missing object must raise what ``get`` raises. Against the
real server this also shows the answer to a GET of one object carries ``apiVersion``
and ``kind`` itself: ``get`` fills them in only for list items, and ``get_text``, which
does not parse, could not.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
import pytest

from jobclaim.apiserver import CONFIGMAPS, JOBS, ApiClient, NotFound, Object, Resource
from tests.support.kinds import WIDGETS, config_map, job, widget
from webhook.engine import TextReader

# Text the API server's encoder escapes or spells its own way: HTML characters, non-ASCII,
# a fraction, an integer a float64 cannot hold.
AWKWARD: Object = {"note": "<é & ✓>\u2028", "ratio": 0.1, "large": 9007199254740993}

Make = Callable[[ApiClient, str], Object]


def _widget(api: ApiClient, namespace: str) -> Object:
    made = api.create(WIDGETS, namespace, widget("w", spec={"n": 1, **AWKWARD}))
    version = made["metadata"]["resourceVersion"]
    return api.patch_status(WIDGETS, namespace, "w", {"phase": "Ready"}, resource_version=version)


# (id, resource, the object stored under the name "w", what of it must read back)
OBJECTS: list[tuple[str, Resource, Make, Callable[[Object], object], object]] = [
    ("custom resource with status", WIDGETS, _widget, lambda o: o["spec"], {"n": 1, **AWKWARD}),
    (
        "configmap",
        CONFIGMAPS,
        lambda api, ns: api.create(CONFIGMAPS, ns, config_map("w", data={"k": AWKWARD["note"]})),
        lambda o: o["data"],
        {"k": AWKWARD["note"]},
    ),
    ("job", JOBS, lambda api, ns: api.create(JOBS, ns, job("w")), lambda o: o["kind"], "Job"),
]


def _text_reader(api: ApiClient) -> TextReader:
    # Both backends are readers the webhook takes the text path with.
    assert isinstance(api, TextReader)
    return api


@pytest.mark.parametrize(
    ("resource", "make", "part", "carried"),
    [r[1:] for r in OBJECTS],
    ids=[r[0] for r in OBJECTS],
)
def test_the_text_decodes_to_what_get_returns(
    api: ApiClient,
    namespace: str,
    resource: Resource,
    make: Make,
    part: Callable[[Object], object],
    carried: object,
) -> None:
    make(api, namespace)
    # The Job controller writes a new Job's status on its own time (startTime, active), so
    # the two reads can straddle a write (seen under load): compare them at one
    # resourceVersion, reading both again while a write fell between them, up to a deadline.
    deadline = time.monotonic() + 30.0
    while True:
        text = _text_reader(api).get_text(resource, namespace, "w")
        assert isinstance(text, bytes)
        decoded = orjson.loads(text)
        got = api.get(resource, namespace, "w")
        same = decoded["metadata"]["resourceVersion"] == got["metadata"]["resourceVersion"]
        if same or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # the pause between polls, not a synchronization
    assert decoded == got
    assert part(decoded) == carried
    assert (decoded["apiVersion"], decoded["kind"]) == (resource.api_version, resource.kind)


@pytest.mark.parametrize("resource", [WIDGETS, CONFIGMAPS, JOBS], ids=lambda r: r.kind)
def test_a_missing_object_is_not_found_alike(
    api: ApiClient, namespace: str, resource: Resource
) -> None:
    with pytest.raises(NotFound) as by_get:
        api.get(resource, namespace, "absent")
    with pytest.raises(NotFound) as by_text:
        _text_reader(api).get_text(resource, namespace, "absent")
    got, texted = by_get.value, by_text.value
    assert (str(texted), texted.status, texted.reason) == (str(got), got.status, got.reason)
