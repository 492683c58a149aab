"""The engine emulator (`infscale emulate`): an LLM inference engine without a GPU.

batching.py  continuous batching with the replay's engine model (pure core + real-time loop)
metrics.py   vLLM / TGI / SGLang /metrics, names, types and buckets as each engine exposes them
server.py    the aiohttp app: OpenAI-compatible API, readiness paths, error formats
profiles.py  engine profiles by name (fast-test, replay scenarios) or file
cli.py       the command and its settings
"""
