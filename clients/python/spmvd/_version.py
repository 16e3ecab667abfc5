"""The client's version: the daemon's SPMV_VERSION (engine/spmv.h), checked by tests/test_version.py."""
__version__ = "0.1.0"
