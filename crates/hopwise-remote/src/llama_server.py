# Starts llama.cpp's HTTP server (xllamacpp) on 127.0.0.1 and keeps it up until killed.
# Usage: python llama_server.py MODEL.gguf PORT THREADS CTX [PARALLEL]
# With PARALLEL > 1 the slots share one KV cache of CTX cells (like hopwise's in-process engine).
import sys
import time

import xllamacpp

model, port, threads, ctx = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
parallel = int(sys.argv[5]) if len(sys.argv) > 5 else 1
p = xllamacpp.CommonParams()
p.model.path = model
p.hostnames = ["127.0.0.1"]
p.port = port
p.n_ctx = ctx
p.n_parallel = parallel
p.kv_unified = parallel > 1
p.cpuparams.n_threads = threads
p.cpuparams_batch.n_threads = threads
server = xllamacpp.Server(p)
print(f"llama server listening on 127.0.0.1:{port}", flush=True)
while True:
    time.sleep(3600)
