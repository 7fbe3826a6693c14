"""The ASGI application (uvicorn marketplace.asgi:application; gunicorn with uvicorn
workers in production, see docs/howto/production.md).

Like marketplace.wsgi, an ASGI server is production: debug stays off unless
DJANGO_DEBUG=1 says otherwise (the demo runner says so), so the settings then require
DJANGO_SECRET_KEY and DJANGO_ALLOWED_HOSTS. Under ASGI the chat pages receive messages
through Server-Sent Events (marketplace.social.events); with debug on, static files are
served here as runserver serves them (in production whitenoise does).
"""

import os

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marketplace.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")
application = get_asgi_application()
if settings.DEBUG:
    application = ASGIStaticFilesHandler(application)
