"""Jobs that train on the session's real node: TensorFlow, PyTorch and
PaddlePaddle in their own containers, how their runs end, and what one
team's pods can reach of another's. One process runs this folder."""
