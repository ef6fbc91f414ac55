# The program of examples/paddlejob-elastic, run by `sh -c "$ENTRY"` in
# TRAINER_PACKAGE in every pod of the job. One program for every role:
# PADDLE_TRAINING_ROLE says which (else the pod's name, {job}-{role}-{index}).
#
# - PSERVER: answers every connection on PADDLE_INIT_PORT with its name.
# - MASTER: writes a key into the etcd beside it (EDL's task queue lives
#   there) through etcd's v3 JSON API, reads it back, and answers on 8080
#   with what etcd said.
# - TRAINER: reaches the master and every pserver by their Services' names
#   ({job}-{role}-{index}.{namespace}.svc), then for PADDLE_INIT_NUM_PASSES
#   passes of a second reads the live trainer count from the file named by
#   DLK8S_TRAINERS_FILE (the kubelet refreshes it when the autoscaler, or
#   you, change the job's count) and prints it whenever it changes; exits 0.
exec python3 -u - <<'PYTHON'
import base64, http.server, json, os, signal, socket, socketserver, sys, time, urllib.request

signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(128 + signum))
job, ns = os.environ["PADDLE_JOB_NAME"], os.environ["NAMESPACE"]
me = socket.gethostname()
role = os.environ.get("PADDLE_TRAINING_ROLE") or me[len(job) + 1 :].rsplit("-", 1)[0]
role = role.lower()


def say(message):
    print(f"{role} {me}: {message}", flush=True)


def service(name, index, port):
    return f"{job}-{name}-{index}.{ns}.svc", port


def retry(what, attempt, seconds=60):
    deadline = time.monotonic() + seconds
    while True:
        try:
            return attempt()
        except OSError as err:
            if time.monotonic() > deadline:
                say(f"FAILED: {what}: {err}")
                sys.exit(1)
            time.sleep(0.5)


def pserver():
    port = int(os.environ["PADDLE_INIT_PORT"])

    class Answer(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.sendall(f"pserver {me}\n".encode())

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    with socketserver.ThreadingTCPServer(("", port), Answer) as server:
        say(f"listening on {port}")
        server.serve_forever()


def etcd(path, body):
    request = urllib.request.Request(
        f"http://127.0.0.1:2379/v3/{path}", json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as reply:
        return json.load(reply)


def master():
    b64 = lambda text: base64.b64encode(text.encode()).decode()
    retry("etcd", lambda: etcd("kv/put", {"key": b64("paddle/master"), "value": b64(me)}))
    [kv] = etcd("kv/range", {"key": b64("paddle/master")})["kvs"]
    with urllib.request.urlopen("http://127.0.0.1:2379/version", timeout=5) as reply:
        version = json.load(reply)["etcdserver"]
    found = base64.b64decode(kv["value"]).decode()
    answer = f"etcd {version} answers: paddle/master = {found}"
    say(answer)

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = answer.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.ThreadingHTTPServer(("", 8080), Answer).serve_forever()


def trainer():
    def ask_master():
        host, port = service("master", 0, 8080)
        with urllib.request.urlopen(f"http://{host}:{port}/", timeout=5) as reply:
            return f"master {host}:{port} says {reply.read().decode()}"

    say(retry("the master", ask_master))
    for index in range(int(os.environ["PSERVERS"])):
        address = service("pserver", index, int(os.environ["PADDLE_INIT_PORT"]))

        def ask_pserver():
            with socket.create_connection(address, timeout=5) as conn:
                return conn.makefile().readline().strip()

        say(f"pserver {address[0]}:{address[1]} answers: {retry('a pserver', ask_pserver)}")
    path, seen = os.environ["DLK8S_TRAINERS_FILE"], None
    passes = int(os.environ["PADDLE_INIT_NUM_PASSES"])
    for done in range(passes):
        with open(path) as live:
            count = live.read().strip()
        if count != seen:
            say(f"pass {done}: trainers {count}" + (f" (was {seen})" if seen else ""))
            seen = count
        time.sleep(1)
    say(f"done: {passes} passes")


{"pserver": pserver, "master": master, "trainer": trainer}[role]()
PYTHON
