"""Runs llama.cpp's HTTP server (from the xllamacpp wheel) on 127.0.0.1 until killed.

usage: python llama_server.py MODEL.gguf PORT
Chat and embeddings (mean pooling) are on; 2 threads, 2048-token context. `cargo xtask test` starts it for the
real-server tests and stops it by pid.
"""
import sys
import time

import xllamacpp as xlc


def main() -> None:
    model, port = sys.argv[1], int(sys.argv[2])
    params = xlc.CommonParams()
    params.model.path = model
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = 2048
    params.cpuparams.n_threads = 2
    params.embedding = True
    params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    server = xlc.Server(params)
    print(f"llama.cpp server on 127.0.0.1:{port}", flush=True)
    while server is not None:
        time.sleep(3600)


if __name__ == "__main__":
    main()
