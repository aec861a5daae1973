"""Int8 weights with a float32 scale per output channel, for scoring on CPUs.

`quantize_params` turns float32 parameters into those of the same network
built with `T5Config.quantize="int8"`: every kernel the quantized network
stores as int8 (attention q/k/v/o and the feed-forward kernels) becomes

    scale[j]     = max_i |kernel[i, j]| / 127     (1 for an all-zero column)
    values[i, j] = round(kernel[i, j] / scale[j])  in [-127, 127]

stored as `kernel` (int8) and `kernel_scale` (float32); every other
parameter is kept as it is. Symmetric, per output channel, as CTranslate2's
and FBGEMM's int8 linear layers. The network multiplies the int8 values in
bfloat16 (exactly representable there) with float32 accumulation and scales
the result (`kernels.dense`); its attention products take bfloat16 inputs
too. On XLA:CPU that is faster than int8 products: with AVX512-BF16,
bfloat16 dots run at about twice float32's rate and int8 ones (s8 x s8 ->
s32) at about 1.45x.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np
from flax import traverse_util

from seahorse_metrics.model.model import EncoderDecoderModel

Params = Any

INT8_MAX = 127
SCALE_SUFFIX = "_scale"


def quantize_kernel(kernel: np.ndarray, xp: Any = np) -> tuple[np.ndarray, np.ndarray]:
    """(int8 values, float32 scale per output channel) of a 2-D [in, out] kernel.

    Args:
      kernel: The float kernel.
      xp: The array module: numpy (loading, on the host), or `jax.numpy`
        inside a jitted function (weights drawn on a device, as
        bench/accelerator.py does), the same formula either way.
    """
    kernel = xp.asarray(kernel, xp.float32)
    if kernel.ndim != 2:
        raise ValueError(f"int8 quantization takes 2-D kernels, got shape {kernel.shape}")
    largest = xp.max(xp.abs(kernel), axis=0)
    scale = xp.where(largest > 0, largest / INT8_MAX, 1.0).astype(xp.float32)
    values = xp.clip(xp.rint(kernel / scale), -INT8_MAX, INT8_MAX).astype(xp.int8)
    return values, scale


def kernel_converter(model: EncoderDecoderModel) -> Callable[[str, Any], dict[str, Any]]:
    """The per-parameter conversion of `quantize_params`, for loading:
    `load_checkpoint(path, convert=kernel_converter(model))` quantizes each
    kernel as it is read, so the float32 model is never whole in memory.

    The returned function maps (flat name "a/b/kernel", float array) to
    {name: int8 values, name + "_scale": scales} for a kernel `model`
    stores as int8, else to {name: the array} (cast to the network's dtype).

    Raises:
      ValueError: if `model` is not quantized, or (from the function) for
        a parameter the network lacks or of another shape.
    """
    if model.config.quantize != "int8":
        raise ValueError(f"the model is not quantized (config.quantize={model.config.quantize!r})")
    wanted = traverse_util.flatten_dict(model.abstract_params(), sep="/")

    def convert(name: str, value: Any) -> dict[str, Any]:
        leaf = wanted.get(name)
        if leaf is None or name.endswith(SCALE_SUFFIX):
            raise ValueError(f"parameter {name!r} is not one of this network's")
        if tuple(value.shape) != tuple(leaf.shape):
            raise ValueError(
                f"parameter {name!r} has shape {tuple(value.shape)}, the network "
                f"wants {tuple(leaf.shape)}"
            )
        if leaf.dtype == np.int8:
            values, scale = quantize_kernel(np.asarray(jax.device_get(value)))
            return {name: values, name + SCALE_SUFFIX: scale}
        return {name: value if value.dtype == leaf.dtype else value.astype(leaf.dtype)}

    return convert


def quantize_params(model: EncoderDecoderModel, params: Params) -> Params:
    """The float32 `params` of `model`'s network, quantized for `model`.

    Args:
      model: The model to run, built with `config.quantize="int8"`.
      params: Float32 parameters of the same network unquantized (a nested
        dict, host or device arrays).

    Returns:
      A nested dict matching `model.abstract_params()`: numpy int8 kernels
      and float32 scales, and the other parameters as given (the same
      arrays, so device arrays stay where they are and are not copied).

    Raises:
      ValueError: if `model` is not quantized or the parameters do not fit it.
    """
    convert = kernel_converter(model)
    given = traverse_util.flatten_dict(params, sep="/")
    result = {}
    for name in traverse_util.flatten_dict(model.abstract_params(), sep="/"):
        if name.endswith(SCALE_SUFFIX):
            continue
        if name not in given:
            raise ValueError(f"the parameters lack {name!r}; are they of this network?")
        result.update(convert(name, given[name]))
    return traverse_util.unflatten_dict(result, sep="/")
