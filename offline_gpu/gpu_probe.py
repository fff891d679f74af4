"""Record what a real SGLang server answers (the shapes the sglang backend relies on)."""

import json
import sys

import httpx
from transformers import AutoTokenizer

url, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
tok = AutoTokenizer.from_pretrained(model)
text = tok.apply_chat_template(
    [{"role": "user", "content": "Say hello in one word."}], tokenize=False, add_generation_prompt=True
)
ids = tok.encode(text, add_special_tokens=False)
answers = {"eos": [tok.eos_token, tok.eos_token_id]}
for name in ("health_generate", "get_model_info", "get_server_info"):
    r = httpx.get(f"{url}/{name}", timeout=60)
    answers[name] = r.json() if "json" in r.headers.get("content-type", "") else r.text
for trim in (False, True):
    body = {
        "input_ids": ids,
        "return_logprob": True,
        "no_stop_trim": trim,
        "sampling_params": {"max_new_tokens": 32, "temperature": 0, "stop_token_ids": [tok.eos_token_id]},
    }
    answers[f"generate_no_stop_trim_{trim}"] = httpx.post(f"{url}/generate", json=body, timeout=60).json()
json.dump(answers, open(out, "w"), indent=1, default=str)
print(json.dumps({k: v for k, v in answers.items() if k.startswith("generate")}, default=str)[:3000])
