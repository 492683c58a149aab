"""Engine profiles the emulator and the online tools accept: every replay scenario's engine, plus
`fast-test`, small and with millisecond steps so a whole chain runs in seconds.

`--profile NAME|FILE`: a built-in name here, a replay scenario name (replay/profiles.py), or a
scenario YAML/JSON file (its `engine:` section is the profile).
"""

from __future__ import annotations

from collections.abc import Mapping

from replay.profiles import SCENARIOS, EngineProfile, ProfileError
from replay.scenariofile import get_scenario

# 4 running requests, 5 ms steps: a 100-token answer takes about half a second, a 1,000-token
# prompt one step of 10 ms
FAST_TEST = EngineProfile(
    max_num_seqs=4,
    max_num_batched_tokens=2_048,
    kv_budget_tokens=16_384,
    step_base_s=0.005,
    prefill_token_s=5e-6,
    prefill_attention_s=0.0,
    decode_request_s=0.0005,
    decode_context_s=0.0,
)

PROFILES: Mapping[str, EngineProfile] = {"fast-test": FAST_TEST}


def get_engine_profile(name_or_path: str) -> EngineProfile:
    if name_or_path in PROFILES:
        return PROFILES[name_or_path]
    try:
        return get_scenario(name_or_path).engine
    except ProfileError as e:
        known = ", ".join([*PROFILES, *SCENARIOS])
        raise ProfileError(f"profile {name_or_path!r}: {e} (built-in profiles: {known})") from e
