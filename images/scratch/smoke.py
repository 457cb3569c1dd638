"""The scratch images' smoke check, run inside a container of the image by
images/build.sh and tests/images (``python3 -c <this file> ENGINE ENTRYPOINT...``).

It starts the image's entry point on the container's (empty) /var/lib/scratch, and,
as user ``scratch`` over 127.0.0.1 with the image's own client, creates, fills and
drops a table in database ``scratch``; then it stops the server with SIGTERM, as the
kubelet stops a sidecar, which must exit 0. The container has a network namespace
of its own, so the fixed ports of the contract (5432, 3306) collide with nothing.
Standard library only: it runs on the image's Python, before anything else is known.
"""

import signal
import subprocess
import sys
import time

CLIENTS = {
    "postgresql": [
        "psql",
        "-X",
        "-q",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
        "-h",
        "127.0.0.1",
        "-p",
        "5432",
        "-U",
        "scratch",
        "-d",
        "scratch",
        "-c",
    ],
    "mariadb": [
        "mariadb",
        "--no-defaults",
        "-N",
        "-B",
        "-h",
        "127.0.0.1",
        "-P",
        "3306",
        "-u",
        "scratch",
        "scratch",
        "-e",
    ],
}
TABLE = "CREATE TABLE smoke (id integer PRIMARY KEY); INSERT INTO smoke VALUES (1); "
TABLE += "SELECT count(*) FROM smoke; DROP TABLE smoke;"
START_SECONDS = 120  # initdb / mariadb-install-db and the first start, on a loaded machine

engine, entry = sys.argv[1], sys.argv[2:]
client = CLIENTS[engine]
server = subprocess.Popen(entry)
deadline = time.monotonic() + START_SECONDS
while True:  # a bounded poll: the server answers once its data is initialized
    probe = subprocess.run(
        [*client, "SELECT version()"], check=False, capture_output=True, text=True
    )
    if probe.returncode == 0:
        break
    if server.poll() is not None:
        sys.exit(f"smoke: the {engine} server exited with {server.returncode}")
    if time.monotonic() > deadline:
        server.kill()
        sys.exit(f"smoke: {engine} did not answer in {START_SECONDS} s: {probe.stderr.strip()}")
    time.sleep(0.5)
print(f"scratch@127.0.0.1/scratch answers: {probe.stdout.strip()}")
done = subprocess.run([*client, TABLE], check=False, capture_output=True, text=True)
if done.returncode != 0 or done.stdout.split() != ["1"]:
    server.kill()
    sys.exit(f"smoke: create, insert, drop failed: {done.stdout} {done.stderr}")
print("created, filled and dropped a table as scratch")
server.send_signal(signal.SIGTERM)
try:
    code = server.wait(timeout=60)
except subprocess.TimeoutExpired:
    server.kill()
    sys.exit("smoke: the server did not stop within 60 s of SIGTERM")
if code != 0:
    sys.exit(f"smoke: the server exited {code} on SIGTERM, not 0")
print("stopped by SIGTERM, exit 0")
