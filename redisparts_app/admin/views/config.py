"""The JSON configuration editor and the maintenance flag."""

import json
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import reverse

from ...conf import app_settings
from ...exceptions import InvalidConfig, RedisPartsError
from ...services import config, listings
from ..forms import ConfigForm, MaintenanceForm
from .paging import CONFIGS_PER_PAGE, cursor_page

__all__ = ["configuration", "maintenance"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin


def configuration(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    status = 200
    if request.method == "POST":
        model_admin.require_change(request)
        form = ConfigForm(request.POST)
        if form.is_valid():
            kind, name = form.cleaned_data["kind"], form.cleaned_data["name"]
            if form.cleaned_data["delete"]:
                gone = config.delete_config(kind, name)
                messages.success(
                    request,
                    f"Configuration {kind}/{name} deleted."
                    if gone
                    else f"There was no configuration {kind}/{name}.",
                )
            else:
                try:
                    config.set_config(kind, name, form.cleaned_data["value"])
                except InvalidConfig as exc:
                    form.add_error("value", str(exc))
                else:
                    messages.success(request, f"Configuration {kind}/{name} saved.")
            if form.is_valid():
                query = urlencode({"kind": kind, "name": name})
                return HttpResponseRedirect(f"{reverse('admin:redisparts_config')}?{query}")
        status = 400
    else:
        kind, name = request.GET.get("kind", ""), request.GET.get("name", "")
        initial = {"kind": kind, "name": name, "value": "{}"}
        if kind and name:
            try:
                current = config.get_config(kind, name, wait=0)
                initial["value"] = json.dumps(current, indent=2, ensure_ascii=False)
            except (RedisPartsError, ValueError) as exc:
                messages.error(request, str(exc))
        form = ConfigForm(initial=initial)
    stored, pager = cursor_page(request, listings.config_page, CONFIGS_PER_PAGE)
    return model_admin.render(
        request,
        "config.html",
        {
            "title": "Configuration",
            "form": form,
            "stored": stored,
            "maintenance": config.maintenance_status(),
            "maintenance_form": MaintenanceForm(
                initial={"retry_after": app_settings.MAINTENANCE_RETRY_AFTER}
            ),
            **pager,
        },
        status=status,
    )


def maintenance(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    model_admin.require_change(request)
    back = reverse("admin:redisparts_config")
    if request.POST.get("action") == "clear":
        was_set = config.clear_maintenance()
        messages.success(
            request,
            "Maintenance mode is off." if was_set else "Maintenance mode was already off.",
        )
        return HttpResponseRedirect(back)
    form = MaintenanceForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
        messages.error(request, f"Maintenance mode not changed: {problems}")
        return HttpResponseRedirect(back)
    config.set_maintenance(
        retry_after=form.cleaned_data["retry_after"], message=form.cleaned_data["message"]
    )
    messages.success(request, "Maintenance mode is on: visitors see the maintenance page.")
    return HttpResponseRedirect(back)
