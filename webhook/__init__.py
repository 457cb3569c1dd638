"""The validating admission webhook: what the operator's manager, and anyone else, may
write, judged by the same ``jobclaim`` rules the controller acts by.

Public surface::

    engine = Engine(reader, Settings(manager_username=..., pins=ImagePins(...)))
    outcome = engine.decide("controller-write", body)   # -> Outcome (decision, body)
    app = create_app(engine, readiness=...)              # the FastAPI app
    await serve(engine, cert=..., key=..., host=..., port=...)   # HTTPS, live reload
    explain(body, objects)                                # offline rule trail

Endpoints: ``POST /validate-controller-write``, ``POST /validate-manager-state``,
``GET /healthz``, ``/readyz``, ``/metrics``.
"""

from webhook.app import create_app
from webhook.engine import Engine, Outcome
from webhook.explain import StateReader, explain, load_objects
from webhook.rules import (
    ALLOWED_MESSAGE,
    CONTROLLER_WRITE,
    DEFAULT_MANAGER_USERNAME,
    ENDPOINT_PATHS,
    MANAGER_STATE,
    REGISTRY,
    Decision,
    Endpoint,
    ImagePins,
    Refusal,
    Rule,
    Settings,
)
from webhook.serving import local_certificates, serve

__all__ = [
    "ALLOWED_MESSAGE",
    "CONTROLLER_WRITE",
    "DEFAULT_MANAGER_USERNAME",
    "ENDPOINT_PATHS",
    "MANAGER_STATE",
    "REGISTRY",
    "Decision",
    "Endpoint",
    "Engine",
    "ImagePins",
    "Outcome",
    "Refusal",
    "Rule",
    "Settings",
    "StateReader",
    "create_app",
    "explain",
    "load_objects",
    "local_certificates",
    "serve",
]
