"""What the Paddle image must do before it is cached (Containerfile)."""

import os
import subprocess
import sys

import paddle
from paddle.base import core
from paddle.base.proto import framework_pb2

registered = {framework_pb2.OpProto.FromString(b).type for b in core.get_all_op_protos()}
missing = {"send", "listen_and_serv", "distributed_lookup_table"} - registered
assert not missing, f"this Paddle cannot run a parameter server: no operators {sorted(missing)}"
env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
subprocess.run([sys.executable, "-c", "import etcd3"], env=env, check=True)
print("paddle", paddle.__version__, "with the parameter server's operators and etcd3")
