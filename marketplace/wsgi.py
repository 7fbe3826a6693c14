"""The WSGI application for a WSGI server (gunicorn marketplace.wsgi).

A WSGI server is production: debug stays off unless DJANGO_DEBUG=1 says otherwise, so
the settings then require DJANGO_SECRET_KEY and DJANGO_ALLOWED_HOSTS.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marketplace.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")
application = get_wsgi_application()
