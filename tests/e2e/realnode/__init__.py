"""The real node itself and what runs on it beside the training folder:
GPU driver configuration in real containers, the operator from its image in
the cluster, a release published to a local registry and installed, queued
training through Kueue, and MXNet's and Caffe2's rendezvous. One process
runs this folder."""
