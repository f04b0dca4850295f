from ._varint_py import *
