"""The load test of the demo site (``make load``): gunicorn, whitenoise, locust, loopback.

``python -m bench.load`` (see __main__.py) serves the site as in production and runs
locust (locustfile.py) against it; scenario.py sets the simulated users' pace and names
and seeds their accounts. Not a benchmark of bench/run.py: it needs the ``load`` extra.
"""
