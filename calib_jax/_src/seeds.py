"""Seeds: the one range of integer seeds every seeded function accepts, and the JAX key of a
seed that uses all of its 64 bits.

Loads no JAX on import (the command's settings check their seed before anything else runs);
:func:`key_of_seed` imports it when called.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SEED_RANGE", "check_seed", "key_of_seed"]


#: the seeds every seeded function accepts: the 64-bit words, a negative seed standing for its
#: two's complement (NumPy's ``SeedSequence`` takes the unsigned word, JAX's Threefry key its two halves)
SEED_RANGE = (-(1 << 63), (1 << 64) - 1)


def check_seed(seed: Any, name: str = "seed") -> int:
    """A seed as the unsigned 64-bit word it names.

    Every integer in :data:`SEED_RANGE`, ``[-2^63, 2^64 - 1]``, is a seed; a negative one is
    its two's complement (``-1`` and ``2^64 - 1`` are two spellings of one seed), so every
    64-bit word is a seed and two different words never draw the same numbers. A seed outside
    the range is refused rather than reduced (``jax.random.key`` alone reduces a seed modulo
    2^32 without x64, so ``2^32`` drew what ``0`` draws).

    Args:
      seed: a Python or NumPy integer (``bool`` is not a seed).
      name: the argument's name in the message.

    Returns:
      ``seed mod 2^64`` as a Python int in ``[0, 2^64)``.

    Raises:
      ValueError: naming ``name``, the value and the range, for a non-integer or a seed
        outside the range.

    Example:
      >>> check_seed(7), check_seed(-1) == 2**64 - 1
      (7, True)
      >>> check_seed(2**64)
      Traceback (most recent call last):
      ...
      ValueError: `seed` must be an integer in [-2^63, 2^64 - 1] (a 64-bit word; ...), got 18446744073709551616
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"`{name}` must be an integer, got {seed!r}")
    s = int(seed)
    if not SEED_RANGE[0] <= s <= SEED_RANGE[1]:
        raise ValueError(f"`{name}` must be an integer in [-2^63, 2^64 - 1] (a 64-bit word; a negative seed is its "
                         f"two's complement), got {s}")
    return s % (1 << 64)


def key_of_seed(seed: Any, name: str = "seed") -> Any:
    """The JAX PRNG key of a 64-bit seed (:func:`check_seed`), every bit of it used.

    With the default Threefry-2x32 generator the key's data are the seed's two 32-bit halves
    ``[seed >> 32, seed & (2^32 - 1)]``: the key ``jax.random.key(seed)`` gives for a seed in
    ``[0, 2^32)`` (so those seeds draw exactly what they always drew) and gives under
    ``jax_enable_x64`` for any 64-bit seed, whatever that flag is here. With another default
    generator a seed in ``[0, 2^32)`` is ``jax.random.key(seed)`` and a larger word folds its
    high half into the key of its low half.

    Args:
      seed: an integer in :data:`SEED_RANGE`.
      name: the argument's name in the message.

    Returns:
      A typed PRNG key array of shape ``()``.

    Raises:
      ValueError: as :func:`check_seed`.

    Example:
      >>> import jax
      >>> bool((jax.random.key_data(key_of_seed(5)) == jax.random.key_data(jax.random.key(5))).all())
      True
      >>> jax.random.key_data(key_of_seed(2**32)).tolist()  # jax.random.key would give [0, 0]
      [1, 0]
    """
    import jax
    import jax.numpy as jnp

    word = check_seed(seed, name)
    hi, lo = word >> 32, word & 0xFFFFFFFF
    impl = jax.random.key_impl(jax.random.key(0))
    if str(impl) == "threefry2x32":
        return jax.random.wrap_key_data(jnp.asarray(np.array([hi, lo], np.uint32)), impl=impl)
    key = jax.random.key(lo)
    return key if hi == 0 else jax.random.fold_in(key, hi)
