from ._batch_py import *
