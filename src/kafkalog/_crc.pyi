from typing_extensions import Buffer

from ._crc_py import *
from ._crc_py import HARDWARE as HARDWARE
from ._crc_py import crc32 as crc32
from ._crc_py import crc32c as crc32c
from ._crc_py import crc32c_sw as crc32c_sw

# private: the CRC-32C kernels (compiled twin only; see kafkalog._crc)
_KERNEL: str
_FOLD_MIN: int
def _paths() -> tuple[str, ...]: ...
def _crc32c_path(name: str, data: Buffer, crc: int = 0) -> int: ...
