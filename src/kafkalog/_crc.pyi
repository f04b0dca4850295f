from ._crc_py import *
from ._crc_py import HARDWARE as HARDWARE
from ._crc_py import crc32 as crc32
from ._crc_py import crc32c as crc32c
from ._crc_py import crc32c_sw as crc32c_sw
