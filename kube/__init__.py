"""Implementations of ``jobclaim.apiserver``: the API server as the operator reaches it.

``kube.client`` is the one adapter over the official ``kubernetes`` client (and the
only module that imports it); ``kube.fake`` is the in-memory double with its faults,
for tests, benchmarks and the lab only: no production package imports it
(``tests/test_layers.py``). This module imports neither, so reaching the double does
not load the ``kubernetes`` client.
"""
