"""A layer's weight, float32 or int8 with a scale per output channel, and its
product with the activations (`dense`).

T5X keeps every kernel in its own submodule (`.../attention/query/kernel`);
the network's layers take a `Kernel` and multiply by it here, so the int8
form (`quantize.quantize_params`) changes nothing else.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Sequence, Union

import flax.linen as nn
import jax
import jax.numpy as jnp

Array = jax.Array
Initializer = Callable[..., Array]


class QuantizedKernel(NamedTuple):
    """An int8 kernel [in, out] and its float32 scale per output channel:
    the float kernel is approximately `values * scale`."""

    values: Array
    scale: Array


class Kernel(nn.Module):
    """One named weight in its own submodule, T5X's parameter path
    (`.../query/kernel`); the caller does the product (`dense`).

    Float32 by default; with `quantize="int8"` the kernel is stored as int8
    beside a float32 `kernel_scale` per output channel and returned as a
    `QuantizedKernel`.
    """

    shape: Sequence[int]
    axes: Sequence[str]
    init: Initializer
    param_name: str = "kernel"
    quantize: Optional[str] = None

    @nn.compact
    def __call__(self) -> Union[Array, QuantizedKernel]:
        if self.quantize is None:
            return self.param(
                self.param_name,
                nn.with_logical_partitioning(self.init, tuple(self.axes)),
                tuple(self.shape),
                jnp.float32,
            )
        values = self.param(
            self.param_name,
            nn.with_logical_partitioning(nn.initializers.zeros, tuple(self.axes)),
            tuple(self.shape),
            jnp.int8,
        )
        scale = self.param(
            f"{self.param_name}_scale",
            nn.with_logical_partitioning(nn.initializers.ones, (self.axes[-1],)),
            (self.shape[-1],),
            jnp.float32,
        )
        return QuantizedKernel(values, scale)


def dense(
    x: Array,
    kernel: Union[Array, QuantizedKernel],
    dtype: jnp.dtype,
    int8_products: jnp.dtype = jnp.bfloat16,
) -> Array:
    """`x @ kernel` over the last axis of `x`, in the compute dtype.

    An int8 kernel is multiplied in `int8_products` (its values are exact in
    bfloat16; `x` is rounded to it) with float32 accumulation and then
    scaled per output channel: XLA:CPU runs bfloat16 products about twice as
    fast as float32 ones where the CPU has AVX512-BF16, and faster than its
    int8 ones; where it has not, float32 products are the faster
    (`engines.isa.xla_int8_products`, `T5Config.int8_products`).
    """
    if not isinstance(kernel, QuantizedKernel):
        return jnp.dot(x, kernel.astype(dtype))
    y = jax.lax.dot_general(
        x.astype(int8_products),
        _converted_after(kernel.values, x, int8_products),
        (((x.ndim - 1,), (0,)), ((), ())),
        preferred_element_type=jnp.float32,
    )
    return (y * kernel.scale).astype(dtype)


def kernel_times(
    kernel: Union[Array, QuantizedKernel],
    x_IxN: Array,
    dtype: jnp.dtype,
    int8_products: jnp.dtype = jnp.bfloat16,
) -> Array:
    """`kernel @ x`, [D, N] from a kernel [D, I] as it is stored (never
    transposed) and `x` [I, N], in the compute dtype.

    An int8 kernel multiplies in `int8_products` as in `dense`; its scale,
    per column of the kernel, scales the rows of `x` first.
    """
    if not isinstance(kernel, QuantizedKernel):
        return jnp.dot(kernel.astype(dtype), x_IxN.astype(dtype))
    scaled_IxN = (x_IxN * kernel.scale[:, None]).astype(int8_products)
    y = jax.lax.dot_general(
        _converted_after(kernel.values, x_IxN, int8_products),
        scaled_IxN,
        (((1,), (0,)), ((), ())),
        preferred_element_type=jnp.float32,
    )
    return y.astype(dtype)


def _converted_after(values: Array, x: Array, products: jnp.dtype) -> Array:
    """The int8 `values` in `products`, converted only once `x` is computed.

    Nothing else orders a kernel's conversion after the layer's input, and
    XLA:CPU schedules all of them first and holds every converted kernel
    (it drops `optimization_barrier`s before scheduling): mT5-large's int8
    scoring step took 2.5 GB of temporaries, float32's 0.5. Adding
    `0 * x[0]` (never folded: x[0] could be NaN) ties each to its input.
    """
    zero = (x.reshape(-1)[0] * 0).astype(products)
    return values.astype(products) + zero
