"""The engine emulator (`infscale emulate`): an LLM inference engine without a GPU.

batching.py  continuous batching with the replay's engine model (pure core + real-time loop)
metrics.py   vLLM / TGI / SGLang / JetStream /metrics, names, types and buckets as each engine exposes
             them (tgimetrics.py, jetstreammetrics.py; promclient.py: prometheus_client's writer)
stats.py     the counters and histograms the renderers read
server.py    the aiohttp app: OpenAI-compatible API, readiness paths, error formats
requests.py  request bodies and each engine's error shape
jetstreamapi.py  JetStream's own HTTP API (/v1/generate, /v1/health)
profiles.py  engine profiles by name (fast-test, replay scenarios) or file
cli.py       the command and its settings
"""
