"""`infscale replay online`: a recorded trace against live OpenAI-compatible endpoints.

    infscale replay online --endpoint http://127.0.0.1:8000 --trace azure_llm_2023_conv.csv \\
        --format azure --end-s 60 --out online-out/

Sits beside the offline replay (replay/cli.py, replay/simulate.py) and writes the same report
(replay/report.py, policy name `online`) plus DIR/requests.jsonl, one line per request, which
`infscale replay calibrate` reads.

Each request is sent at its trace time divided by `--speedup` (after the loader's `--rate-scale`),
with a prompt of the trace's input length (that many words, or token ids with `--prompt token-ids`)
and max_tokens = its output length, streamed; TTFT is the time from sending to the first chunk
that carries text, e2e the time to the end of the stream. Several endpoints share the load as the
offline router does: each request goes to the endpoint with the fewest requests outstanding from
this client (ties to the first listed). In-flight requests are bounded (`--max-in-flight`; a send
that would exceed it waits, and its lag is reported) and so is the run (`--max-duration-s`;
requests not sent by then are counted as dropped, those in flight are cancelled).

The package: records.py (the run's configuration and what happened to each request, and
DIR/requests.jsonl), driver.py (the request bodies, the stream parser, the sender), results.py (the
run in the offline report's shape, vLLM's serving metrics) and cli.py (the command).
"""
