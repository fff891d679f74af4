"""SGLang's launch settings for the install at hand: its own defaults, a fallback only for a missing part."""

import sys

from selfplay_gen import serving


def test_an_install_without_the_optional_kernels_falls_back_and_keeps_cuda_graphs():
    choice = serving.choose({})
    assert choice.sglang_args() == [
        "--attention-backend", "triton", "--sampling-backend", "pytorch", "--grammar-backend", "none"
    ]  # fmt: skip
    assert "actor_rollout_ref.rollout.enforce_eager=False" in choice.verl_overrides()
    assert any("xgrammar" in reason for reason in choice.reasons)


def test_a_full_install_gets_sglangs_own_defaults():
    everything = {name: True for name in serving.PROBED}
    assert serving.choose(everything).sglang_args() == []
    assert serving.choose(everything).verl_overrides() == ["actor_rollout_ref.rollout.enforce_eager=False"]
    # FlashAttention-3 alone keeps SGLang's attention choice; sampling still needs prebuilt flashinfer
    fa3 = serving.choose({"sgl_kernel.flash_ops": True, "xgrammar": True})
    assert fa3.sglang_args() == ["--sampling-backend", "pytorch"]


def test_cuda_graphs_off_only_when_asked():
    choice = serving.choose({}, cuda_graphs=False)
    assert choice.sglang_args()[-1] == "--disable-cuda-graph"
    assert "actor_rollout_ref.rollout.enforce_eager=True" in choice.verl_overrides()


def test_the_probe_asks_the_named_python():
    found = serving.probe(sys.executable)
    assert set(found) == set(serving.PROBED) and not found["sgl_kernel.flash_ops"]  # no sglang in the test env
