# ruff: noqa: E501  (exposition lines are kept exactly as engines write them)
"""Expositions in the exact shape each engine writes (../shared/engine_metrics.md), values invented.

Shared by the preset, scrape, catalog and Prometheus-integration tests. Each engine's text carries
the series the presets read plus typical noise (histograms, HELP/TYPE lines, `_created` series).
"""

from __future__ import annotations

VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.7
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} 90.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="meta-llama/Llama-3.1-8B-Instruct"} 10.0
vllm:request_success_created{engine="0",finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7e9
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5000.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12000.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 20.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 20.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.7
# HELP vllm:request_prefill_time_seconds Histogram of time spent in PREFILL phase for request.
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_bucket{engine="0",le="0.3",model_name="meta-llama/Llama-3.1-8B-Instruct"} 70.0
vllm:request_prefill_time_seconds_bucket{engine="0",le="2.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 96.0
vllm:request_prefill_time_seconds_bucket{engine="0",le="10.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 99.0
vllm:request_prefill_time_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 100.0
vllm:request_prefill_time_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 100.0
vllm:request_prefill_time_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 61.5
vllm:request_prefill_time_seconds_bucket{engine="1",le="0.3",model_name="meta-llama/Llama-3.1-8B-Instruct"} 30.0
vllm:request_prefill_time_seconds_bucket{engine="1",le="2.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 40.0
vllm:request_prefill_time_seconds_bucket{engine="1",le="10.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 40.0
vllm:request_prefill_time_seconds_bucket{engine="1",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 41.0
vllm:request_prefill_time_seconds_count{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 41.0
vllm:request_prefill_time_seconds_sum{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 30.0
"""

# V0 engine, before v0.9: model_name only, the old KV-cache name
VLLM_V0 = """\
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="facebook/opt-125m"} 7.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="facebook/opt-125m"} 1.0
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="facebook/opt-125m"} 0.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="facebook/opt-125m"} 0.25
"""

TGI = """\
# HELP tgi_queue_size Current queue size
# TYPE tgi_queue_size gauge
tgi_queue_size 3
# HELP tgi_batch_current_size Current batch size
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 6
# HELP tgi_batch_current_max_tokens Maximum tokens for the current batch
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 4096
# TYPE tgi_batch_max_total_tokens gauge
tgi_batch_max_total_tokens 16384
# TYPE tgi_request_failure counter
tgi_request_failure{err="overloaded"} 2
# HELP tgi_request_success Number of successful requests
# TYPE tgi_request_success counter
tgi_request_success 41
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="1"} 0
tgi_request_generated_tokens_bucket{le="+Inf"} 41
tgi_request_generated_tokens_sum 8200
tgi_request_generated_tokens_count 41
"""

SGLANG = """\
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",pp_rank="0",tp_rank="0"} 5.0
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",pp_rank="0",tp_rank="0"} 9.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="Qwen/Qwen3-8B",pp_rank="0",tp_rank="0"} 0.42
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="Qwen/Qwen3-8B"} 300.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="0.1"} 12.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="0.2"} 60.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="0.4"} 150.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="0.6"} 210.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="0.8"} 240.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="1.0"} 255.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="2.0"} 280.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="4.0"} 290.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="6.0"} 294.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="8.0"} 296.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="10.0"} 297.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="20.0"} 298.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="40.0"} 299.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="60.0"} 300.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="80.0"} 300.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="100.0"} 300.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="200.0"} 300.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="400.0"} 300.0
sglang:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",le="+Inf"} 300.0
sglang:time_to_first_token_seconds_count{model_name="Qwen/Qwen3-8B"} 300.0
sglang:time_to_first_token_seconds_sum{model_name="Qwen/Qwen3-8B"} 96.0
"""

TRITON = """\
nv_inference_pending_request_count{model="llama",version="1"} 7
nv_inference_pending_request_count{model="embed",version="1"} 1
nv_inference_request_success{model="llama",version="1"} 120
nv_inference_count{model="llama",version="1"} 130
"""

TRTLLM = """\
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 1
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 12
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 64
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 12
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"} 0.3
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 300
"""

JETSTREAM = """\
# TYPE jetstream_prefill_backlog_size gauge
jetstream_prefill_backlog_size{id="host-0",model_name="gemma_7b"} 4.0
# TYPE jetstream_generate_backlog_size gauge
jetstream_generate_backlog_size{id="host-0",idx="0",model_name="gemma_7b"} 1.0
jetstream_generate_backlog_size{id="host-0",idx="1",model_name="gemma_7b"} 2.0
# TYPE jetstream_slots_used_percentage gauge
jetstream_slots_used_percentage{id="host-0",idx="0",model_name="gemma_7b"} 0.5
jetstream_slots_used_percentage{id="host-0",idx="1",model_name="gemma_7b"} 0.25
# TYPE kv_cache_utilization_perc gauge
kv_cache_utilization_perc{id="host-0",model_name="gemma_7b"} 37.5
"""

LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 1500
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 900
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 2
# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call
# TYPE llamacpp:n_busy_slots_per_decode counter
llamacpp:n_busy_slots_per_decode 1.5
"""


def vllm_text(waiting: float, running: float, kv: float, model: str = "m", success: float = 0.0) -> str:
    """A one-engine vLLM exposition with chosen values (for scrape and integration tests)."""
    labels = f'engine="0",model_name="{model}"'
    return (
        "# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{{{labels}}} {waiting}\n"
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{{{labels}}} {running}\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f"vllm:kv_cache_usage_perc{{{labels}}} {kv}\n"
        "# TYPE vllm:request_success_total counter\n"
        f'vllm:request_success_total{{{labels},finished_reason="stop"}} {success}\n'
    )


# The Gateway API Inference Extension's endpoint picker (its :9090/metrics): one counter per
# objective (model_name) and the model it was routed to (target_model_name)
EPP = """\
# HELP inference_objective_request_total [ALPHA] Counter of inference objective requests broken out for each model and target model.
# TYPE inference_objective_request_total counter
inference_objective_request_total{model_name="llama",target_model_name="llama"} 70
inference_objective_request_total{model_name="llama",target_model_name="llama-lora"} 30
# HELP inference_pool_average_queue_size [ALPHA] The average number of requests pending in the model server queue.
# TYPE inference_pool_average_queue_size gauge
inference_pool_average_queue_size{name="pool"} 3
"""
# before v1.0 (InferenceModel, since renamed InferenceObjective)
EPP_V0 = """\
# TYPE inference_model_request_total counter
inference_model_request_total{model_name="llama",target_model_name="llama"} 42
"""
