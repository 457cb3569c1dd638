"""The checkout-only lab, not packaged in the wheel: the local control plane (the Go
harness in ``lab/controlplane`` and ``lab.localplane`` that starts it), ``make run``
(``python -m lab.run``), the offline demo (``python -m lab.demo``), a real single-node
cluster (``lab.cluster``, ``python -m lab.cluster``) with its own images
(``lab/images``), and the ptah-compatible executor over real PostgreSQL
(``python -m lab.executor``).
"""
