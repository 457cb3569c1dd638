"""Speaking as an operation Pod on the real API server: its bound token and its record.

No kubelet runs beside the harness's API server, so no Pod ever reads its projected
token. The API server still issues one: a TokenRequest bound to the Pod (the Job
controller created it; it need not have been scheduled) is exactly the credential the
kubelet would have projected, and authenticates with the Pod's name and UID in
``userInfo.extra``. With it, the runner's own ``ApiRecorder`` creates the record over
HTTPS, so the record admission rule and its policy judge a real Pod-bound request.
The helpers live in ``lab.standin``, which the local run's readings use too.
"""

from __future__ import annotations

from lab.standin import identity_of, pod_token, record_as_pod, recorder_for
from runner import RecordUnwritten

__all__ = ["RecordUnwritten", "identity_of", "pod_token", "record_as_pod", "recorder_for"]
