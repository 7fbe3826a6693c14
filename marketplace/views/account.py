"""The login page: Django's, except that a signed-in visitor is sent home."""

from django.contrib import messages
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import redirect


class SiteLoginView(LoginView):
    """Django's LoginView; a signed-in user who opens it without ``next`` goes home.

    With ``next`` (a page the account may not open sent them here) the form shows, so
    they can log in as another user.
    """

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponseBase:
        if request.user.is_authenticated and not self.get_redirect_url():
            messages.info(request, f"You are signed in as {request.user.get_username()}.")
            return redirect("home")
        return super().get(request, *args, **kwargs)


login = SiteLoginView.as_view()
