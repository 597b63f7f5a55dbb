"""NumPy copies of pyarrow arrays read from their buffers.

pyarrow's ``Array.to_numpy``, ``numpy.asarray(array)`` and ``pyarrow.compute`` calls with a
Python scalar load pandas when it is installed (measured with pyarrow 26: 0.2 s, a sixth of
``calib-jax evaluate``'s fixed cost). The command reads numbers only, so it takes them from the
arrays' data buffers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["fixed_width_values", "null_mask", "float64_values"]


def fixed_width_values(arr: Any, dtype: Any) -> np.ndarray:
    """The value slots of a fixed-width pyarrow array as a NumPy copy.

    A null's slot holds whatever the buffer has: read :func:`null_mask` beside it.

    Args:
      arr: a pyarrow ``Array`` (not chunked) of a fixed-width type whose values are ``dtype``.
      dtype: the NumPy dtype of one value (``numpy.float64`` for a ``float64`` array).

    Returns:
      (len(arr),) NumPy array; the array's offset (a slice) is honoured.

    Example:
      >>> import numpy as np, pyarrow as pa
      >>> from calib_jax.logs.arrow_values import fixed_width_values
      >>> fixed_width_values(pa.array([1.0, 2.0, 3.0]).slice(1), np.float64).tolist()
      [2.0, 3.0]
    """
    dtype = np.dtype(dtype)
    data = arr.buffers()[1] if len(arr) else None
    if data is None:
        return np.zeros(len(arr), dtype)
    return np.frombuffer(data, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize).copy()


def null_mask(arr: Any) -> np.ndarray:
    """Whether each element of a pyarrow array is null.

    Args:
      arr: a pyarrow ``Array`` (not chunked).

    Returns:
      (len(arr),) NumPy bool array.

    Example:
      >>> import pyarrow as pa
      >>> from calib_jax.logs.arrow_values import null_mask
      >>> null_mask(pa.array([1.0, None])).tolist()
      [False, True]
    """
    import pyarrow as pa

    if arr.null_count == 0:
        return np.zeros(len(arr), bool)
    return fixed_width_values(arr.is_null().cast(pa.int8()), np.int8).astype(bool)


def _numpy_dtype(t: Any) -> np.dtype | None:
    import pyarrow as pa

    if pa.types.is_integer(t):
        return np.dtype(f"{'u' if pa.types.is_unsigned_integer(t) else ''}int{t.bit_width}")
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return np.dtype(f"float{t.bit_width}")
    return None


def float64_values(arr: Any) -> np.ndarray:
    """A numeric pyarrow array as float64, nulls NaN: what
    ``numpy.asarray(arr.to_numpy(zero_copy_only=False), numpy.float64)`` gives.

    Integer and float32/float64 arrays are read from their buffers; other types (booleans,
    decimals, half floats) go through ``to_numpy``.

    Args:
      arr: a pyarrow ``Array`` (not chunked).

    Returns:
      (len(arr),) float64 NumPy array.

    Example:
      >>> import pyarrow as pa
      >>> from calib_jax.logs.arrow_values import float64_values
      >>> float64_values(pa.array([1, None, 3])).tolist()
      [1.0, nan, 3.0]
    """
    dtype = _numpy_dtype(arr.type)
    if dtype is None:
        return np.asarray(arr.to_numpy(zero_copy_only=False), np.float64)
    x = fixed_width_values(arr, dtype).astype(np.float64)
    if arr.null_count:
        x[null_mask(arr)] = np.nan
    return x
