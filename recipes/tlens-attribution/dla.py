"""Direct logit attribution per layer block with TransformerLens (an input of the tlens-attribution recipe)."""
import argparse
import json
import pathlib

import torch
from transformer_lens import HookedTransformer

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="gpt2-small")
parser.add_argument("--layers", default="0-11")
parser.add_argument("--out", default="/outputs")
args = parser.parse_args()

first, last = (int(x) for x in args.layers.split("-"))
model = HookedTransformer.from_pretrained(args.model)
prompt = "When Mary and John went to the store, John gave a drink to"
tokens = model.to_tokens(prompt)
_, cache = model.run_with_cache(tokens)
answer = model.to_single_token(" Mary")
direction = model.W_U[:, answer]
scores = {}
for layer in range(first, last + 1):
    resid = cache[f"blocks.{layer}.hook_attn_out"][0, -1]
    scores[layer] = float(torch.dot(resid, direction))
out = pathlib.Path(args.out)
out.mkdir(parents=True, exist_ok=True)
(out / f"dla-{args.layers}.json").write_text(json.dumps(scores, indent=2))
print(json.dumps(scores))
