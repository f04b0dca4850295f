from ._arrow_encode_py import *  # noqa: F401,F403  (the pure twin is the type contract)
