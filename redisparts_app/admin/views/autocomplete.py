"""A "type to test" box completing the members of a guild, with the guilds a page at a time."""

from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

from ...exceptions import RedisPartsError
from ...services import autocomplete, listings
from ..forms import AutocompleteForm
from .paging import GUILDS_PER_PAGE, cursor_page

__all__ = ["COMPLETIONS_SHOWN", "try_autocomplete"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin

COMPLETIONS_SHOWN = 10


def try_autocomplete(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    guilds, pager = cursor_page(request, listings.guild_page, GUILDS_PER_PAGE)
    form = AutocompleteForm(request.GET or None)
    results, guild = None, None
    if form.is_bound and form.is_valid():
        guild = form.cleaned_data["guild"]
        try:
            book = autocomplete.AddressBook(guild)
            results = book.complete(form.cleaned_data["prefix"], limit=COMPLETIONS_SHOWN)
        except (RedisPartsError, ValueError) as exc:
            form.add_error("prefix", str(exc))
    context = {
        "title": "Autocomplete",
        "guilds": guilds,
        "form": form,
        "guild": guild,
        "results": results,
        **pager,
    }
    template = "autocomplete_results.html" if request.GET.get("fragment") else "autocomplete.html"
    return model_admin.render(request, template, context)
