"""Tests of the demo site (``marketplace``): run with ``--ds=tests.demo.settings``."""
