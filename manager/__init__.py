"""The manager: the program the chart's Deployment runs (``python -m manager``).

The composition root: it reads ``manager.config`` from the environment and assembles
the controller (``controller``), the webhook (``webhook``) and the certificates'
live reload (``certs``) into one program (``manager.process``; the webhook in a child
process, ``manager.webhookprocess``), with health
(``manager.health``), metrics (``manager.metrics``) and JSON logs (``manager.logs``).
Nothing else assembles them for the real API server.
"""
