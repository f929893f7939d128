"""web/serve.py: run the live map's app (web/app.py) with uvicorn, now or as a warm standby.

    python web/serve.py [--standby READY_FILE] HOST PORT LIMIT_CONCURRENCY

scripts/web.sh's supervisor runs one app answering and one standby: the
standby imports the app (fastapi, tipg, pyproj: seconds of CPU on a busy
machine) and then waits; when the answering app dies, the supervisor sends
the standby SIGUSR1 and it binds the port at once, so the map answers again
within about a second instead of after a whole start.  A standby writes its
pid to READY_FILE once it can take SIGUSR1 (before that the signal would
kill it).  Without --standby it serves at once, as `uvicorn app:app` would.
"""

import os
import signal
import sys

args = sys.argv[1:]
ready_file = None
if args[:1] == ["--standby"]:
    ready_file, args = args[1], args[2:]
if len(args) != 3:
    sys.exit("usage: serve.py [--standby READY_FILE] HOST PORT LIMIT_CONCURRENCY")
host, port, limit = args[0], int(args[1]), int(args[2])

if ready_file:
    # held pending until sigwait below: no race between the signal and the wait
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    tmp = f"{ready_file}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(tmp, ready_file)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import uvicorn  # noqa: E402

import app  # noqa: E402  (the slow part: what the standby does in advance)

if ready_file:
    signal.sigwait({signal.SIGUSR1})  # until the supervisor says so; SIGTERM ends it
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    print(f"serve: standby {os.getpid()} takes over {host}:{port}", flush=True)

uvicorn.run(app.app, host=host, port=port, access_log=False, timeout_graceful_shutdown=2,
            limit_concurrency=limit)
