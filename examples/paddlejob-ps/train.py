"""Parameter-server training with PaddlePaddle's Fleet: a linear model
learns y = x . W + B from synthetic data, its parameters on the pservers.

One program for both roles, as Fleet programs are: the operator gives every
pod the variables Paddle's own launcher gives them in PS mode
(TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINER_ID, ...:
docs/kinds.md, PaddleJob), and `fleet.init()` reads them. Fleet's GEO mode
(asynchronous, the trainers sending their updates every 10 steps): its
synchronous mode does not run on Paddle 3.0's CPU build.
"""

import os
import socket
import time

# The parameter server's programs run on Paddle's old program representation.
os.environ.setdefault("FLAGS_enable_pir_api", "0")

import numpy as np
import paddle
import paddle.distributed.fleet as fleet

STEPS = int(os.environ.get("PADDLE_INIT_NUM_PASSES", "300"))  # trainer.passes
W = np.array([[2.0], [-3.0], [0.5], [1.0]], dtype="float32")
B = 0.25


def model():
    x = paddle.static.data("x", [None, 4], "float32")
    y = paddle.static.data("y", [None, 1], "float32")
    predicted = paddle.static.nn.fc(x, 1)
    loss = paddle.mean(paddle.nn.functional.square_error_cost(predicted, y))
    strategy = fleet.DistributedStrategy()
    strategy.a_sync = True
    strategy.a_sync_configs = {"k_steps": 10}
    optimizer = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.05), strategy)
    optimizer.minimize(loss)
    return loss


def wait_for_pservers(seconds=300):
    """Until every pserver accepts connections. fleet.init_worker() sends its
    first requests at once and does not repeat one that a pserver still
    starting refused: the trainer then waits for ever. Pserver 0 opens its
    port only after the trainers have met it in fleet.init(), so no launcher
    can wait for it before the program starts; the program must."""
    deadline = time.monotonic() + seconds
    for endpoint in os.environ["PADDLE_PSERVERS_IP_PORT_LIST"].split(","):
        host, port = endpoint.rsplit(":", 1)
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
                break
            except OSError as err:
                if time.monotonic() > deadline:
                    raise SystemExit(f"pserver {endpoint}: no connection in {seconds}s") from err
                time.sleep(0.5)


def train(loss):
    wait_for_pservers()
    executor = paddle.static.Executor(paddle.CPUPlace())
    executor.run(paddle.static.default_startup_program())
    fleet.init_worker()
    me = fleet.worker_index()
    print(f"trainer {me} of {fleet.worker_num()}, pservers {fleet.server_num()}", flush=True)
    rng = np.random.default_rng(me)
    first = last = None
    for step in range(STEPS):
        x = rng.standard_normal((32, 4)).astype("float32")
        (out,) = executor.run(
            paddle.static.default_main_program(), feed={"x": x, "y": x @ W + B}, fetch_list=[loss]
        )
        last = float(np.mean(out))
        first = last if first is None else first
        if step % 50 == 0 or step == STEPS - 1:
            print(f"trainer {me}: step {step} loss {last:.6f}", flush=True)
    fleet.stop_worker()
    print(f"trainer {me}: trained: loss {first:.6f} -> {last:.6f}", flush=True)
    if not last < first / 10:
        raise SystemExit(f"trainer {me}: the loss did not fall")


def main():
    paddle.enable_static()
    fleet.init(is_collective=False)
    loss = model()
    if fleet.is_server():
        print(f"pserver {fleet.server_index()} of {fleet.server_num()} serving", flush=True)
        fleet.init_server()
        fleet.run_server()  # until the job ends and the operator deletes the pod
    else:
        train(loss)


if __name__ == "__main__":
    main()
