from ._arrow_py import *
