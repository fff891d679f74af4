"""Importing this module sets up the process that imports it as one of our verl training workers:
chunked log-probs (`logprobs.install`) and the attention backend choice (`attention.configure`).

GRPO names it as verl's `actor_rollout_ref.model.external_lib`, which each training worker imports
while it builds its model config, after Ray has given the worker its GPU. A Ray
`worker_process_setup_hook` would run earlier, before Ray sets the worker's CUDA_VISIBLE_DEVICES:
importing verl there makes torch count every GPU of the node, and with two GPUs both FSDP ranks
then open the first one (NCCL: "Duplicate GPU detected").
"""

from . import attention
from .logprobs import install

install()
attention.configure()
